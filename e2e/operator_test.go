//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/widgethub/widgethub/api/v1alpha1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// buildImage builds the operator image with `make docker-build` and tags it
// also by its image ID, so a changed operator rolls out on a reused hub. It
// returns that content tag.
func buildImage(t *testing.T, e env) string {
	t.Helper()
	logf("building the operator image %s", e.image)
	run(t, e.root, nil, "nice", "-n", "10", "make", "--no-print-directory", "docker-build", "IMG="+e.image)
	id := strings.TrimSpace(string(run(t, "", nil, "docker", "image", "inspect", "--format", "{{.Id}}", e.image)))
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) < 12 {
		t.Fatalf("unexpected image ID %q of %s", id, e.image)
	}
	repo := e.image
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	tagged := repo + ":e2e-" + id[:12]
	run(t, "", nil, "docker", "tag", e.image, tagged)
	return tagged
}

// deploy installs config/default on the hub with the manager image, as
// `make deploy` does (hack/render.sh, kubectl apply --server-side), after
// removing the chart's release of an earlier run (installChart).
func deploy(t *testing.T, e env, hub *kube, image string) {
	t.Helper()
	uninstallChart(t, e, hub)
	logf("deploying config/default with %s", image)
	manifests := run(t, e.root, nil, "hack/render.sh", image)
	run(t, "", manifests, "kubectl", "--kubeconfig", hub.kubeconfig, "apply", "--server-side", "-f", "-")
}

// waitManager waits for the manager Deployment to be Available with image,
// pulled never from a registry (the image exists only in the node).
func waitManager(t *testing.T, hub *kube, image string) {
	t.Helper()
	eventually(t, managerTimeout, "manager Deployment Available", func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: registrationsNS, Name: managerName}, d); err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != image {
			return fmt.Errorf("manager image is %s, want %s", c.Image, image)
		}
		if c.ImagePullPolicy == corev1.PullAlways {
			return fmt.Errorf("manager imagePullPolicy is %s", c.ImagePullPolicy)
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas ||
			d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
			return fmt.Errorf("rollout: %d updated, %d available, %d total of %d (generation %d observed %d)",
				d.Status.UpdatedReplicas, d.Status.AvailableReplicas, d.Status.Replicas, *d.Spec.Replicas,
				d.Generation, d.Status.ObservedGeneration)
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not Available: %v", d.Status.Conditions)
	})
	logf("manager Available with %s", image)
}

// dumpHub logs what helps to understand a failure: the hub's view of the
// members and the manager's log.
func dumpHub(t *testing.T, hub *kube) {
	var out bytes.Buffer
	for _, args := range [][]string{
		{"get", "memberclusters,secrets,pods", "-n", registrationsNS, "-o", "wide"},
		{"get", "lease", "-n", registrationsNS, "-o", "wide"},
		{"logs", "-n", registrationsNS, "-l", "app.kubernetes.io/name=" + managerName, "--prefix", "--tail", "150"},
	} {
		cmd := exec.Command("kubectl", append([]string{"--kubeconfig", hub.kubeconfig}, args...)...)
		b, _ := cmd.CombinedOutput()
		fmt.Fprintf(&out, "$ kubectl %s\n%s\n", strings.Join(args, " "), b)
	}
	t.Logf("hub state after failure:\n%s", out.String())
}

// engagedSince reads widgethub_member_engaged_since_seconds of the member
// from the manager replica that serves it (MemberCluster status.servedBy,
// the replica's Pod name), as a metrics reader (managerMetrics): the Unix
// time of the member's current engagement.
func engagedSince(ctx context.Context, hub *kube, member string) (int64, error) {
	pod, err := servedBy(ctx, hub, member)
	if err != nil {
		return 0, err
	}
	out, err := managerMetrics(ctx, hub, pod)
	if err != nil {
		return 0, err
	}
	prefix := `widgethub_member_engaged_since_seconds{cluster="` + member + `"} `
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no %s in the manager's metrics", strings.TrimSpace(prefix))
}

// servedBy is the manager Pod that serves member, from its MemberCluster.
func servedBy(ctx context.Context, hub *kube, member string) (string, error) {
	mc := &v1alpha1.MemberCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: registrationsNS, Name: member}, mc); err != nil {
		return "", err
	}
	if mc.Status.ServedBy == "" {
		return "", fmt.Errorf("no manager replica serves %s yet", member)
	}
	return mc.Status.ServedBy, nil
}
