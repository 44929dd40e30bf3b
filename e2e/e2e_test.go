//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// fleet is the hub and the members of a run.
type fleet struct {
	hub     *kube
	members map[string]*kube // by registration name
	ns      string           // the members' namespace of this run's Widgets
}

// TestE2E sets up the fleet on kind and runs the scenarios in order: each
// builds on the state the one before left.
func TestE2E(t *testing.T) {
	f := setUp(t)
	steps := []struct {
		name string
		run  func(*testing.T, *fleet)
	}{
		{"WidgetsRunInBothMembers", widgetsRun},
		{"ScaleSubresource", scaleWidget},
		{"MemberNodeRestart", memberRestart},
		{"SecretRotation", rotateSecret},
		{"ManagerPodDeleted", managerPodDeleted},
		{"UnjoinStopsReconciling", unjoinStops},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, f) }) {
			t.FailNow() // the next steps build on this one
		}
	}
}

// setUp creates (or reuses) the kind clusters, deploys the operator on the
// hub from config/default, replaces that with the Helm chart, and joins both
// members.
func setUp(t *testing.T) *fleet {
	t.Helper()
	e := loadEnv(t)
	start := time.Now()
	dir := e.kubeconfigDir(t)
	p := newProvider()
	names := []string{hubName}
	for _, m := range members {
		names = append(names, m.kind)
	}
	if !e.keep {
		t.Cleanup(func() { deleteClusters(t, p, dir, names...) })
	}

	// The image build runs while nothing else does: a 2-core machine is
	// slowest when kind nodes start and Go compiles at once.
	image := buildImage(t, e)

	f := &fleet{members: map[string]*kube{}, ns: fmt.Sprintf("e2e-%d", time.Now().Unix())}
	f.hub = newKube(t, hubName, ensureCluster(t, p, hubName, e.nodeImage, e.keep, dir))
	loadImage(t, p, hubName, image)
	deploy(t, e, f.hub, image)
	t.Cleanup(func() {
		if t.Failed() {
			dumpHub(t, f.hub)
		}
	})
	for _, m := range members {
		f.members[m.registration] = newKube(t, m.kind, ensureCluster(t, p, m.kind, e.nodeImage, e.keep, dir))
	}
	waitManager(t, f.hub, image)
	// config/default rolled out; the scenario runs on the chart's install.
	installChart(t, e, f.hub, image)
	waitManager(t, f.hub, image)

	for _, m := range members {
		var extra []string
		if registered(t, f.hub, m.registration) {
			extra = append(extra, "--overwrite") // a kept hub from an earlier run
		}
		join(t, f.hub, f.members[m.registration], m.registration, extra...)
	}
	for _, m := range members {
		waitMember(t, f.hub, m.registration, metav1.ConditionTrue, v1alpha1.MemberEngagedReason, engageTimeout)
	}
	_, out := widgethub(f.hub, "clusters")
	logf("fleet up after %s; kubeconfigs in %s\n%s", time.Since(start).Round(time.Second), dir, out)
	return f
}
