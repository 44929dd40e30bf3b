package app_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// heldWrites is an admission webhook that holds every request until released,
// and counts the requests it holds at once; it lets a Deployment named
// inForceProbe through at once, noting that it saw one.
type heldWrites struct {
	release chan struct{}
	probed  atomic.Bool

	mu          sync.Mutex
	held, most  int
	releaseOnce sync.Once
}

func (h *heldWrites) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	if review.Request.Name == inForceProbe {
		h.probed.Store(true)
		h.answer(w, review)
		return
	}
	h.mu.Lock()
	h.held++
	h.most = max(h.most, h.held)
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	h.mu.Lock()
	h.held--
	h.mu.Unlock()
	h.answer(w, review)
}

// answer allows the request of review.
func (h *heldWrites) answer(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}

// inForceProbe names the Deployment whose dry-run creation shows that a
// heldWrites webhook is in force.
const inForceProbe = "held-writes-probe"

// holdDeploymentWritesInForce is holdDeploymentWrites, returning once cp's
// API server calls the webhook for the Deployments of ns.
func holdDeploymentWritesInForce(t *testing.T, cp *fleet.ControlPlane, ns string) *heldWrites {
	t.Helper()
	hubtest.EnsureNamespace(t, cp, ns)
	h := holdDeploymentWrites(t, cp, ns)
	labels := map[string]string{"app": inForceProbe}
	probe := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: inForceProbe}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: v1alpha1.DefaultWidgetImage}}}},
	}}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(cp.Client.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)).To(Succeed())
		g.Expect(h.probed.Load()).To(BeTrue(), "the webhook saw the probe")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	return h
}

func (h *heldWrites) counts() (held, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.most
}

func (h *heldWrites) releaseAll() { h.releaseOnce.Do(func() { close(h.release) }) }

// holdDeploymentWrites makes cp's API server hold every Deployment write in
// namespace ns until the returned webhook releases it: a member whose writes
// hang, with its API server otherwise answering.
func holdDeploymentWrites(t *testing.T, cp *fleet.ControlPlane, ns string) *heldWrites {
	t.Helper()
	h := &heldWrites{release: make(chan struct{})}
	srv := httptest.NewTLSServer(h)
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-deployment-writes"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "hold.widgethub.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To(srv.URL + "/"),
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](30),
		}},
	}
	if err := cp.Client.Create(context.Background(), config); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Client.Delete(context.Background(), config); err != nil {
			t.Error(err)
		}
		h.releaseAll()
		srv.Close()
	})
	return h
}

// The worker bounds of the default flags, as docs/manager.md and
// docs/fault-matrix.md state them: 32 workers, of which one member holds at
// most 24.
const (
	documentedWorkers   = 32
	documentedPerMember = 24
)

// documentedPerMemberBound fails t unless opts are the default worker flags,
// and returns the bound on one member's workers that the docs state for them.
func documentedPerMemberBound(t *testing.T, opts app.Options) int {
	t.Helper()
	if opts.MaxConcurrentReconciles != documentedWorkers || opts.MaxConcurrentReconcilesPerMember != 0 {
		t.Fatalf("the manager runs %d workers, %d per member: the documented defaults are %d and 0 (three quarters, %d)",
			opts.MaxConcurrentReconciles, opts.MaxConcurrentReconcilesPerMember, documentedWorkers, documentedPerMember)
	}
	return documentedPerMember
}

// A member whose writes hang holds at most its share of the shared workers:
// another member's change is reconciled while every worker the hanging member
// may use waits on it, and once its writes go through nothing of it is lost.
func TestHangingMemberLeavesWorkersToOthers(t *testing.T) {
	const ns, widgets = "held", 30
	alpha, beta := testFleet.Member("alpha"), testFleet.Member("beta")
	bound := documentedPerMemberBound(t, managerOptions())
	hubtest.EnsureNamespace(t, alpha, ns)
	hook := holdDeploymentWrites(t, alpha, ns)
	hubtest.Register(t, "alpha", alpha)
	hubtest.Register(t, "beta", beta)
	t.Cleanup(func() {
		if err := alpha.Client.DeleteAllOf(context.Background(), &v1alpha1.Widget{}, client.InNamespace(ns)); err != nil {
			t.Error(err)
		}
	})
	if err := fleet.CreateWidgets(context.Background(), alpha.Client, ns, "held", widgets, 4); err != nil {
		t.Fatal(err)
	}

	g := NewWithT(t)
	held := func() int { n, _ := hook.counts(); return n }
	g.Eventually(held, hubtest.Within, 20*time.Millisecond).Should(Equal(bound), "alpha's Deployment writes held by the webhook")
	g.Consistently(held, time.Second, 20*time.Millisecond).Should(Equal(bound), "alpha's Deployment writes held by the webhook")
	took := hubtest.ExpectReconcilesPromptly(t, "beside-held", 2)
	t.Logf("beta reconciled a change in %s while %d of alpha's writes were held", took, bound)
	if held, most := hook.counts(); held != bound || most != bound {
		t.Fatalf("alpha had %d writes held (at most %d), want %d: the bound on a member's reconciles does not hold", held, most, bound)
	}

	hook.releaseAll()
	g.Eventually(func(g Gomega) {
		for i := range widgets {
			key := types.NamespacedName{Namespace: ns, Name: fleet.WidgetName("held", i)}
			g.Expect(hubtest.Deployment(g, alpha, key).Spec.Replicas).To(Equal(ptr.To[int32](1)))
		}
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
}
