package charts_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/internal/fleet"
)

// releaseNamespace is where the install tests install the chart.
const releaseNamespace = "widgethub-system"

// releaseHub is a real hub API server (internal/fleet) that the install
// tests install the chart into with the helm binary.
type releaseHub struct {
	*fleet.Fleet
	// kubeconfig is the file of the hub's admin kubeconfig, for helm.
	kubeconfig string
}

// startReleaseHub starts the fleet opts describes, stopped when t ends, and
// makes the release namespace as docs/install.md does: restricted Pod
// Security.
func startReleaseHub(t *testing.T, opts fleet.Options) *releaseHub {
	t.Helper()
	f, err := fleet.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	h := &releaseHub{Fleet: f, kubeconfig: filepath.Join(t.TempDir(), "hub.kubeconfig")}
	if err := os.WriteFile(h.kubeconfig, f.Hub.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := f.Hub.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return h
}

// helm runs helm on the hub in the release namespace and returns its
// output; t fails when it fails, or when the API server warned (Helm prints
// the warnings, PodSecurity's among them).
func (h *releaseHub) helm(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := helm(t, append(args, "--kubeconfig", h.kubeconfig, "--namespace", releaseNamespace)...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	if strings.Contains(stderr, "PodSecurity") || strings.Contains(stderr, "would violate") {
		t.Errorf("helm %s: the API server warned:\n%s", strings.Join(args, " "), stderr)
	}
	return out
}

// allowed asks the hub (a SubjectAccessReview) whether user may do what
// attrs describe.
func (h *releaseHub) allowed(t *testing.T, user string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
	if err := h.Hub.Client.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}
