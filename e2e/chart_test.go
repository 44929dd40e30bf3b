//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/internal/manifests"
)

// The hub is installed twice: first from config/default (deploy, as make
// deploy does), which must roll out, and then with the Helm chart, which
// replaces it and runs the scenario. Both install paths run on a real
// cluster each time.

// releaseName is the chart's release: its objects then have config/default's names.
const releaseName = "widgethub"

// helmBinary is $HELM (make e2e sets it) or what hack/helm.sh builds.
func helmBinary(t *testing.T, e env) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	return strings.TrimSpace(string(run(t, e.root, nil, "hack/helm.sh")))
}

func helm(t *testing.T, e env, hub *kube, args ...string) []byte {
	t.Helper()
	return run(t, e.root, nil, helmBinary(t, e), append(args, "--kubeconfig", hub.kubeconfig, "--namespace", registrationsNS)...)
}

// helmReleased reports whether the chart's release is installed on hub.
func helmReleased(t *testing.T, e env, hub *kube) bool {
	t.Helper()
	out := helm(t, e, hub, "list", "--short", "--all")
	for line := range strings.Lines(string(out)) {
		if strings.TrimSpace(line) == releaseName {
			return true
		}
	}
	return false
}

// uninstallChart removes the chart's release from a hub kept from an
// earlier run, so that config/default installs on a hub without it.
func uninstallChart(t *testing.T, e env, hub *kube) {
	t.Helper()
	if !helmReleased(t, e, hub) {
		return
	}
	logf("uninstalling the chart release %s kept from an earlier run", releaseName)
	helm(t, e, hub, "uninstall", releaseName, "--wait", "--timeout", managerTimeout.String())
}

// installChart replaces config/default's install with the chart's: it
// deletes config/default's objects but its Namespace and CRDs (they stay,
// with the registrations and MemberClusters, as they would for a user
// moving to Helm), waits for them to go, and installs the chart with image.
func installChart(t *testing.T, e env, hub *kube, image string) {
	t.Helper()
	objs, err := manifests.Decode(run(t, e.root, nil, "hack/render.sh", image))
	if err != nil {
		t.Fatal(err)
	}
	logf("replacing config/default's install with the chart %s", releaseName)
	for _, u := range objs {
		if u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		eventually(t, managerTimeout, "delete "+u.GetKind()+" "+u.GetName(), func(ctx context.Context) error {
			err := hub.Delete(ctx, u, client.PropagationPolicy("Foreground"))
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err := hub.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy()); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s %s still there (get: %v)", u.GetKind(), u.GetName(), err)
			}
			return nil
		})
	}
	repo, tag := image, "latest"
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo, tag = image[:i], image[i+1:]
	}
	helm(t, e, hub, "install", releaseName, "charts/widgethub",
		"--set", "image.repository="+repo, "--set", "image.tag="+tag)
}
