//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

// widgethub runs `kubectl widgethub ARGS` against the hub, in process, and
// returns its exit code and output.
func widgethub(hub *kube, args ...string) (int, string) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := plugin.Run(ctx, append([]string{"--kubeconfig", hub.kubeconfig}, args...), &out, &out)
	return code, out.String()
}

// join registers the member on the hub with `kubectl widgethub join NAME
// --member-kubeconfig F --kind`; the hub reaches it at
// https://<kind name>-control-plane:6443 (from the kind-<name> context).
func join(t *testing.T, hub, member *kube, name string, extra ...string) {
	t.Helper()
	args := append([]string{"join", name, "--member-kubeconfig", member.kubeconfig, "--kind"}, extra...)
	code, out := widgethub(hub, args...)
	if code != 0 {
		t.Fatalf("kubectl widgethub %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	logf("kubectl widgethub %s:\n%s", strings.Join(args, " "), strings.TrimSpace(out))
}

// unjoin removes the member's registration from the hub. It leaves the
// member alone (--keep-token): the scenarios check what the hub does.
func unjoin(t *testing.T, hub *kube, name string) {
	t.Helper()
	code, out := widgethub(hub, "unjoin", name, "--keep-token")
	if code != 0 {
		t.Fatalf("kubectl widgethub unjoin %s: exit %d\n%s", name, code, out)
	}
	logf("kubectl widgethub unjoin %s:\n%s", name, strings.TrimSpace(out))
}

// memberReady returns the Ready condition of the member's MemberCluster.
func memberReady(ctx context.Context, hub *kube, name string) (*metav1.Condition, error) {
	mc := &v1alpha1.MemberCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: registrationsNS, Name: name}, mc); err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady)
	if c == nil {
		return nil, fmt.Errorf("MemberCluster %s has no Ready condition yet", name)
	}
	return c, nil
}

// waitMember waits for the member's MemberCluster Ready condition to have
// status and reason.
func waitMember(t *testing.T, hub *kube, name string, status metav1.ConditionStatus, reason string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	eventually(t, timeout, fmt.Sprintf("MemberCluster %s Ready=%s/%s", name, status, reason), func(ctx context.Context) error {
		c, err := memberReady(ctx, hub, name)
		if err != nil {
			return err
		}
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("Ready=%s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	logf("MemberCluster %s Ready=%s/%s after %s", name, status, reason, time.Since(start).Round(time.Second))
}

// waitMemberGone waits for the member's MemberCluster to disappear.
func waitMemberGone(t *testing.T, hub *kube, name string) {
	t.Helper()
	eventually(t, engageTimeout, "MemberCluster "+name+" deleted", func(ctx context.Context) error {
		_, err := memberReady(ctx, hub, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}
