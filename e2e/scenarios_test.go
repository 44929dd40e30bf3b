//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// The Widget every scenario works on, one in each member.
const widget = "web"

// widgetsRun: a Widget in each member gets a Deployment whose pods Run, and
// reports them available with Ready=True.
func widgetsRun(t *testing.T, f *fleet) {
	for name, m := range f.members {
		createWidget(t, m, f.ns, widget, 2)
		logf("created Widget %s/%s (2 replicas) in %s (%s)", f.ns, widget, name, m.kind)
	}
	for _, m := range f.members {
		waitWidget(t, m, f.ns, widget, 2)
	}
}

// scaleWidget: `kubectl scale widget` (the scale subresource) resizes the
// Deployment and the Widget follows.
func scaleWidget(t *testing.T, f *fleet) {
	m := f.members["m1"]
	out := m.kubectl(t, "-n", f.ns, "scale", "widget", widget, "--replicas", "3")
	logf("kubectl scale: %s", strings.TrimSpace(string(out)))
	waitWidget(t, m, f.ns, widget, 3)
	sel := strings.TrimSpace(string(m.kubectl(t, "-n", f.ns, "get", "widget", widget, "-o", "jsonpath={.status.selector}")))
	if !strings.Contains(sel, "app.kubernetes.io/instance="+widget) {
		t.Errorf("Widget status.selector = %q, want it to select the Widget's pods", sel)
	}
}

// memberRestart: the member's node container stopped turns its MemberCluster
// Unreachable while the other member keeps working; started again it turns
// Ready, and its Widget changed in the meantime is reconciled.
func memberRestart(t *testing.T, f *fleet) {
	m1, m2 := f.members["m1"], f.members["m2"]
	node := nodeContainer(m1.kind)
	logf("docker stop %s", node)
	docker(t, "stop", node)
	stopped := true
	defer func() {
		if stopped {
			docker(t, "start", node) // leave the fleet whole for the next steps
		}
	}()
	waitMember(t, f.hub, "m1", metav1.ConditionFalse, v1alpha1.MemberUnreachableReason, unreachableWait)

	// A dead member does not hold up another.
	setReplicas(t, m2, f.ns, widget, 1)
	waitWidget(t, m2, f.ns, widget, 1)
	if c, err := memberReady(context.Background(), f.hub, "m2"); err != nil || c.Status != metav1.ConditionTrue {
		t.Errorf("m2 while m1 is down: %v %v", c, err)
	}

	logf("docker start %s", node)
	start := time.Now()
	docker(t, "start", node)
	stopped = false
	// Change m1's Widget as soon as its API server takes the write, before
	// the hub has engaged m1 again when this side wins the race (the hub
	// retries with backoff and then starts m1's caches afresh); either way
	// the change must be reconciled. The log says which side won.
	hubView := "unknown"
	if err := pollEvery(250*time.Millisecond, restartTimeout, func(ctx context.Context) error {
		if c, err := memberReady(ctx, f.hub, "m1"); err == nil {
			hubView = string(c.Status) + "/" + c.Reason
		}
		return patchReplicas(ctx, m1, f.ns, widget, 1)
	}); err != nil {
		t.Fatalf("%s API server not back within %s: %v", m1.kind, restartTimeout, err)
	}
	logf("%s took the change %s after docker start; the hub saw m1 as Ready=%s just before",
		m1.kind, time.Since(start).Round(time.Second), hubView)
	waitMember(t, f.hub, "m1", metav1.ConditionTrue, v1alpha1.MemberEngagedReason, restartTimeout)
	waitWidget(t, m1, f.ns, widget, 1)
}

// rotateSecret: joining again with --overwrite mints a new token, replaces
// the registration Secret and revokes the old token. Only the token changed,
// so the hub swaps it in place: the member keeps its engagement (no relist)
// and goes on being reconciled with the new token, also once the old one no
// longer authenticates.
func rotateSecret(t *testing.T, f *fleet) {
	m1 := f.members["m1"]
	before := registration(t, f.hub, "m1")
	var since int64
	eventually(t, engageTimeout, "m1's engagement time in the manager's metrics", func(ctx context.Context) (err error) {
		since, err = engagedSince(ctx, f.hub, "m1")
		return err
	})
	join(t, f.hub, m1, "m1", "--overwrite")
	rotated := time.Now()
	after := registration(t, f.hub, "m1")
	if bytes.Equal(before.Data["kubeconfig"], after.Data["kubeconfig"]) {
		t.Fatalf("join --overwrite left the registration kubeconfig unchanged")
	}
	// kube-apiserver caches a token's authentication for 10 s: past that,
	// only the new token authenticates. The same request with each, from
	// this host: the new token's 200 shows that the old one's 401 is its own.
	time.Sleep(time.Until(rotated.Add(15 * time.Second)))
	if code := tokenStatus(t, m1, after); code != http.StatusOK {
		t.Errorf("a list of Widgets in %s with the new token: %d, want 200", m1.kind, code)
	}
	if code := tokenStatus(t, m1, before); code != http.StatusUnauthorized {
		t.Errorf("a list of Widgets in %s with the token join --overwrite revoked: %d, want 401", m1.kind, code)
	}
	setReplicas(t, m1, f.ns, widget, 2)
	waitWidget(t, m1, f.ns, widget, 2)
	waitMember(t, f.hub, "m1", metav1.ConditionTrue, v1alpha1.MemberEngagedReason, engageTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), engageTimeout)
	defer cancel()
	now, err := engagedSince(ctx, f.hub, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if now != since {
		t.Errorf("m1 was engaged afresh (%s, was %s) for a token-only change: its caches relisted",
			time.Unix(now, 0).Format(time.TimeOnly), time.Unix(since, 0).Format(time.TimeOnly))
	}
	logf("m1 reconciled with the new token %s after join --overwrite, in the engagement of %s",
		time.Since(rotated).Round(time.Second), time.Unix(since, 0).Format(time.TimeOnly))
}

// managerPodDeleted: deleting the manager Pod that serves m1 hands m1 to
// another replica at once (the Pod drains its members and releases them as
// it stops), and a change made meanwhile is reconciled.
func managerPodDeleted(t *testing.T, f *fleet) {
	m1 := f.members["m1"]
	var pod string
	eventually(t, engageTimeout, "the replica serving m1", func(ctx context.Context) (err error) {
		pod, err = servedBy(ctx, f.hub, "m1")
		return err
	})
	start := time.Now()
	run(t, "", nil, "kubectl", "--kubeconfig", f.hub.kubeconfig, "delete", "pod", "-n", registrationsNS, pod, "--wait=false")
	setReplicas(t, m1, f.ns, widget, 3)
	var next string
	eventually(t, engageTimeout, "m1 served by another replica", func(ctx context.Context) (err error) {
		if next, err = servedBy(ctx, f.hub, "m1"); err == nil && next == pod {
			err = fmt.Errorf("m1 is still served by %s", pod)
		}
		return err
	})
	handedOver := time.Since(start)
	waitMember(t, f.hub, "m1", metav1.ConditionTrue, v1alpha1.MemberEngagedReason, engageTimeout)
	waitWidget(t, m1, f.ns, widget, 3)
	logf("deleted manager Pod %s: m1 served by %s %s later, the change made meanwhile reconciled %s after the delete",
		pod, next, handedOver.Round(time.Second), time.Since(start).Round(time.Second))
}

// unjoinStops: after `kubectl widgethub unjoin` the hub forgets the member
// and no longer reconciles its Widgets, while the other member goes on.
func unjoinStops(t *testing.T, f *fleet) {
	m1, m2 := f.members["m1"], f.members["m2"]
	unjoin(t, f.hub, "m2")
	waitMemberGone(t, f.hub, "m2")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	want, err := deploymentReplicas(ctx, m2, f.ns, widget)
	if err != nil {
		t.Fatal(err)
	}
	setReplicas(t, m2, f.ns, widget, want+2)
	setReplicas(t, m1, f.ns, widget, 1) // m1 still is reconciled
	waitWidget(t, m1, f.ns, widget, 1)
	consistently(t, quietPeriod, "m2's Deployment after unjoin", func(ctx context.Context) error {
		got, err := deploymentReplicas(ctx, m2, f.ns, widget)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("Deployment replicas changed from %d to %d: the unjoined member is still reconciled", want, got)
		}
		return nil
	})
	logf("m2's Deployment stayed at %d replicas for %s after unjoin", want, quietPeriod)
}

// registered tells whether the hub has a registration Secret of name.
func registered(t *testing.T, hub *kube, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := hub.Get(ctx, client.ObjectKey{Namespace: registrationsNS, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("registration Secret %s: %v", name, err)
	}
	return err == nil
}

// registration is the member's registration Secret on the hub.
// tokenStatus is the status m's API server answers to a list of Widgets
// made with the token of the registration reg, reached from this host (the
// registration names m's address inside the kind network) with no other
// credential.
func tokenStatus(t *testing.T, m *kube, reg *corev1.Secret) int {
	t.Helper()
	member, err := connect.RESTConfig(reg.Data["kubeconfig"], connect.ConfigOptions{})
	if err != nil || member.REST.BearerToken == "" {
		t.Fatalf("the token of registration %s: %v", reg.Name, err)
	}
	host, err := clientcmd.BuildConfigFromFlags("", m.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(host)
	cfg.BearerToken = member.REST.BearerToken
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/apis/widgethub.io/v1alpha1/widgets?limit=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("a list of Widgets in %s: %v", m.kind, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func registration(t *testing.T, hub *kube, name string) *corev1.Secret {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: registrationsNS, Name: name}, s); err != nil {
		t.Fatalf("registration Secret %s: %v", name, err)
	}
	return s
}
