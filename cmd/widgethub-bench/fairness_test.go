//go:build scenarios && !race

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
)

const (
	floodWidgets = 600
	quietWidgets = 30
)

// TestQuietMemberIsServedDuringAFlood floods one member with new Widgets and
// changes single Widgets of another member meanwhile. With one first-in
// first-out queue, a quiet change waits behind the flood's backlog; with the
// fair queue it waits for at most one request of the flooded member. The
// assertions are relative to the flood's own drain time, so a slow machine
// slows both sides.
//
// The file builds only without -race: under the race detector the test
// process (manager, watchers and writers) is starved of CPU at the flood's
// start, and the quiet member's goroutines wait seconds to run whatever the
// queue. `make test` runs it on its own after the -race run.
func TestQuietMemberIsServedDuringAFlood(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A failure says how loaded the machine was, so that a reader can tell
	// another CPU-heavy process's noise from a regression of the queue.
	atStart := machineLoad()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("machine load: %s at the start, %s at the end", atStart, machineLoad())
		}
	})
	f := engagedFlood(ctx, t, testFleet.Member("flooded"), testFleet.Member("quiet"))
	res, err := f.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expectBacklog(t, f, res)
	expectQuietServedDuringBacklog(t, res)
}

// engagedFlood creates the quiet member's Widgets, registers both members
// with the suite's operator, waits until it has engaged them, and returns the
// flood of the test. Its trackers stop when the test ends.
func engagedFlood(ctx context.Context, t *testing.T, flooded, quiet *fleet.ControlPlane) flood {
	t.Helper()
	floodedClient := directClient(t, flooded)
	quietClient := directClient(t, quiet)
	if err := fleet.CreateWidgets(ctx, quietClient, "quiet", quietPrefix, quietWidgets, 4); err != nil {
		t.Fatal(err)
	}
	floodTracker := startTracker(ctx, t, flooded, "")
	quietTracker := startTracker(ctx, t, quiet, "quiet")
	quietRollouts, err := newRolloutTracker(ctx, quiet.Config, clusters.NewScheme(), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(quietRollouts.stop)

	for _, m := range []*fleet.ControlPlane{flooded, quiet} {
		if err := testFleet.Hub.Client.Create(ctx, registration.NewSecret(registration.DefaultNamespace, m.Name, m.Kubeconfig)); err != nil {
			t.Fatal(err)
		}
	}
	// The quiet member is engaged once its Widgets are reconciled. The
	// flooded member has no Widget yet: its first one shows its engagement.
	engageCtx, cancelEngage := context.WithTimeout(ctx, time.Minute)
	defer cancelEngage()
	if _, err := quietTracker.waitReconciled(engageCtx, "quiet", quietWidgets); err != nil {
		t.Fatalf("quiet member not engaged: %v", err)
	}
	if err := fleet.CreateWidgets(ctx, floodedClient, "probe", "probe", 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := floodTracker.waitReconciled(engageCtx, "probe", 1); err != nil {
		t.Fatalf("flooded member not engaged: %v", err)
	}
	return flood{
		flooded: floodedClient, quiet: quietClient,
		floodTracker: floodTracker, quietTracker: quietTracker, quietRollouts: quietRollouts,
		floodNamespace: "flood", widgets: floodWidgets, writers: 32,
		quietNamespace: "quiet", quietWidgets: quietWidgets, changeEvery: 50 * time.Millisecond,
		window: 3 * time.Minute,
	}
}

// expectBacklog checks that the flood was reconciled and that it built a
// backlog for the quiet member's changes to compete with.
func expectBacklog(t *testing.T, f flood, res *floodResult) {
	t.Helper()
	if res.drained.IsZero() {
		t.Fatalf("the flood was not reconciled within the window: %d of %d", res.reconciled, floodWidgets)
	}
	backlog := floodWidgets - f.floodTracker.reconciledBy("flood", res.created)
	t.Logf("flood of %d: created in %s, reconciled in %s, %d not reconciled when the last was created; %d quiet changes",
		floodWidgets, res.created.Sub(res.start), res.drainTime(), backlog, len(res.changes))
	// Without a backlog the flood would not compete with the quiet member.
	if backlog < floodWidgets/5 {
		t.Fatalf("the flood built a backlog of only %d Widgets; the test measures nothing (raise floodWidgets)", backlog)
	}
	if len(res.changes) < 10 {
		t.Fatalf("only %d quiet changes during the flood", len(res.changes))
	}
}

// expectQuietServedDuringBacklog checks that every quiet change was
// reconciled, while the flood still had a backlog and within a small part of
// the flood's drain time.
func expectQuietServedDuringBacklog(t *testing.T, res *floodResult) {
	t.Helper()
	drain := res.drainTime()
	var slowest time.Duration
	duringBacklog := 0
	var undeployed []string
	for _, c := range res.changes {
		if c.reconciled.IsZero() {
			t.Fatalf("quiet change of %s (generation %d) was not reconciled within the window", c.key, c.generation)
		}
		slowest = max(slowest, c.reconciled.Sub(c.at))
		if c.floodLeft > 0 {
			duringBacklog++
		}
		if c.deployed.IsZero() {
			undeployed = append(undeployed, fmt.Sprintf("%s generation %d", c.key, c.generation))
		}
	}
	// The bench splits each change's time at its Deployment's write.
	if len(undeployed) > 0 {
		t.Errorf("the Deployments of %d of %d quiet changes were not seen with their new replicas, first %s", len(undeployed), len(res.changes), undeployed[0])
	}
	p50, p99 := p50p99(res.latencies(res.end))
	t.Logf("quiet change latency p50 %s, p99 %s, max %s; %d of %d reconciled while the flood had a backlog",
		p50, p99, formatDuration(slowest), duringBacklog, len(res.changes))
	// A first-in first-out queue makes the slowest change wait for the
	// backlog left when the last Widget of the flood is created, about half
	// the drain time or more, and the median a tenth of it.
	if slowest > drain/3 {
		t.Errorf("the slowest quiet change took %s, more than a third of the flood's drain time %s: the quiet member waited behind the flood (machine load %s)",
			formatDuration(slowest), formatDuration(drain), machineLoad())
	}
	if p50.value > drain/20 {
		t.Errorf("the median quiet change took %s, more than a twentieth of the flood's drain time %s (machine load %s)", p50, formatDuration(drain), machineLoad())
	}
	if duringBacklog < len(res.changes)*9/10 {
		t.Errorf("only %d of %d quiet changes were reconciled while the flooded member still had unreconciled Widgets (machine load %s)",
			duringBacklog, len(res.changes), machineLoad())
	}
}

// machineLoad is the load averages of /proc/loadavg (1, 5 and 15 minutes)
// and the number of CPUs.
func machineLoad() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return fmt.Sprintf("unknown (%v) on %d CPUs", err, runtime.NumCPU())
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return fmt.Sprintf("%q on %d CPUs", data, runtime.NumCPU())
	}
	return fmt.Sprintf("%s %s %s (1, 5, 15 min) on %d CPUs", f[0], f[1], f[2], runtime.NumCPU())
}

// startTracker starts a tracker of cp's Widgets in namespace (all when
// empty), stopped when the test ends.
func startTracker(ctx context.Context, t *testing.T, cp *fleet.ControlPlane, namespace string) *tracker {
	t.Helper()
	tr, err := newTracker(ctx, cp.Config, clusters.NewScheme(), namespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.stop)
	return tr
}

func directClient(t *testing.T, cp *fleet.ControlPlane) client.Client {
	t.Helper()
	c, err := newClient(cp.Config, clusters.NewScheme())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
