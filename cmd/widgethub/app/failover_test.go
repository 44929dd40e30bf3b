//go:build scenarios

package app_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	widgetreconciler "github.com/widgethub/widgethub/reconcilers/widget"
)

// The failover test's sizes and bounds. A killed leader's Lease expires 15 s
// after the last renewal the standby saw; the standby tries every 2 to 4.4 s
// (client-go's retry period of 2 s with its jitter factor of 1.2), so it sees
// that renewal up to 4.4 s late and takes the Lease up to 4.4 s after it
// expires: docs/install.md's 24 s from the kill.
const (
	failoverNS      = "widgethub-failover" // registration namespace of the two processes
	failoverMember  = "failover"           // member only they serve
	floodNS         = "flood"
	floodWidgets    = 100
	floodWriters    = 8
	floodRoundEvery = 2 * time.Second  // a round changes every Widget once
	floodAfterKill  = 20 * time.Second // the flood goes on this long after the kill
	takeoverBound   = 24 * time.Second // docs/install.md
	convergeBound   = 3 * time.Minute
	finalImage      = "registry.example/widget:final"
)

// TestStandbyTakesOverFromAKilledLeader runs two manager processes with
// leader election (the default) on the suite's hub, kills the leader with
// SIGKILL in the middle of a flood of Widget changes, and checks that the
// standby takes over and finishes: every Widget converges, the changes made
// after the kill land, and each Deployment was written by one field manager
// and never went back to an older spec.
func TestStandbyTakesOverFromAKilledLeader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir() // before any process: removed after they are killed
	bin := buildManager(t)
	member, hubKubeconfig := registerFailoverMember(ctx, t, dir)
	history := watchDeployments(ctx, t, member, floodNS)

	// Leader election is not asked for: it is the default.
	args := []string{"--kubeconfig=" + hubKubeconfig, "--registration-namespace=" + failoverNS,
		"--metrics-secure=false", "--health-probe-bind-address=0"}
	metrics := map[*managerProcess]string{} // each process's metrics address
	var procs []*managerProcess
	for _, name := range []string{"a", "b"} {
		addr, err := fleet.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		p := startManagerProcess(t, bin, dir, name, append(args, "--metrics-bind-address="+addr))
		procs, metrics[p] = append(procs, p), addr
	}
	leader, standby, holder := waitForLeader(t, procs)
	t.Logf("process %s (pid %d) leads as %s; %s (pid %d) stands by", leader.name, leader.Pid(), holder, standby.name, standby.Pid())
	expectLeaderStatus(t, leader, metrics[leader], 1)
	expectLeaderStatus(t, standby, metrics[standby], 0)

	killed := make(chan time.Time, 1)
	flood := &floodResult{}
	var floodWG sync.WaitGroup
	floodWG.Go(func() { runFlood(ctx, member.Client, killed, flood) })
	t.Cleanup(floodWG.Wait) // runs after cancel (registered later, so earlier)
	t.Cleanup(cancel)

	killedAt := killLeaderWhenBusy(ctx, t, member, flood, leader, standby)
	killed <- killedAt
	<-leader.Exited()
	t.Logf("SIGKILL to %s in flood round %d", leader.name, flood.roundsDone())
	expectTakeover(t, standby, holder, history, killedAt)
	expectLeaderStatus(t, standby, metrics[standby], 1)

	floodWG.Wait()
	g := NewWithT(t)
	g.Expect(flood.err).NotTo(HaveOccurred())
	t.Logf("flood: %d Widgets, %d rounds, %d of them started after the kill", floodWidgets, flood.rounds, flood.roundsAfterKill)
	g.Expect(flood.roundsAfterKill).To(BeNumerically(">=", 2), "the flood went on through the takeover")

	widgets := expectLastChangeLands(ctx, t, member, flood)
	g.Expect(standby.writesBeforeLease()).To(BeZero(), "the new leader wrote Deployments before it held the Lease")
	writes, err := history.stop()
	g.Expect(err).NotTo(HaveOccurred())
	expectOneWriterInOrder(t, member, widgets, writes, flood.rounds)
	expectLeaseReleasedOnStop(t, standby)
}

// registerFailoverMember starts a member of the failover test's own,
// registers it in a namespace of its own, so that the suite's in-process
// manager (serving widgethub-system) never sees it, and writes the hub's
// kubeconfig into dir; it returns the member and the kubeconfig's path.
func registerFailoverMember(ctx context.Context, t *testing.T, dir string) (member *fleet.ControlPlane, hubKubeconfig string) {
	t.Helper()
	g := NewWithT(t)
	members, err := testFleet.AddMembers(failoverMember)
	if err != nil {
		t.Fatalf("start member %s: %v", failoverMember, err)
	}
	member = members[0]
	g.Expect(fleet.EnsureNamespace(ctx, testFleet.Hub.Client, failoverNS)).To(Succeed())
	g.Expect(fleet.EnsureNamespace(ctx, member.Client, floodNS)).To(Succeed())
	secret := registration.NewSecret(failoverNS, failoverMember, member.Kubeconfig)
	if err := testFleet.Hub.Client.Create(ctx, secret); apierrors.IsAlreadyExists(err) { // -count=2
		g.Expect(testFleet.Hub.Client.Update(ctx, secret)).To(Succeed())
	} else {
		g.Expect(err).NotTo(HaveOccurred())
	}
	hubKubeconfig = filepath.Join(dir, "hub.kubeconfig")
	g.Expect(os.WriteFile(hubKubeconfig, testFleet.Hub.Kubeconfig, 0o600)).To(Succeed())
	return member, hubKubeconfig
}

// killLeaderWhenBusy sends SIGKILL to the leader once it is busy: the flood
// is past its first rounds and the leader has written at least half of the
// Deployments. It returns when the signal was sent.
func killLeaderWhenBusy(ctx context.Context, t *testing.T, member *fleet.ControlPlane, flood *floodResult, leader, standby *managerProcess) time.Time {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		g.Expect(flood.roundsDone()).To(BeNumerically(">=", 3))
		deployments := &appsv1.DeploymentList{}
		g.Expect(member.Client.List(ctx, deployments, client.InNamespace(floodNS))).To(Succeed())
		g.Expect(len(deployments.Items)).To(BeNumerically(">=", floodWidgets/2))
	}, 2*time.Minute, hubtest.Poll).Should(Succeed(), "the leader reconciles the flood")
	g.Expect(standby.writesBeforeLease()).To(BeZero(), "the standby wrote Deployments before it held the Lease")

	killedAt := time.Now()
	g.Expect(leader.Signal(syscall.SIGKILL)).To(Succeed())
	return killedAt
}

// documentedLease is the Lease that elects the leader as docs/metrics.md,
// docs/install.md and the alerts name it.
const documentedLease = "widgethub.widgethub.io"

// expectLeaderStatus waits until the manager p, serving plain HTTP metrics at
// addr, reports leader_election_master_status{name=documentedLease} as want:
// 1 while it leads, 0 while it stands by (docs/metrics.md).
func expectLeaderStatus(t *testing.T, p *managerProcess, addr string, want float64) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		v, ok := scrapeMetrics(g, addr).value("leader_election_master_status", "name", documentedLease)
		g.Expect(ok).To(BeTrue(), "leader_election_master_status{name=%q} is served", documentedLease)
		g.Expect(v).To(Equal(want))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "leader_election_master_status of %s", p.name)
}

// expectTakeover checks that the standby takes the Lease from holder once it
// expires, and that the new leader writes Deployments.
func expectTakeover(t *testing.T, standby *managerProcess, holder string, history *deploymentHistory, killedAt time.Time) {
	t.Helper()
	g := NewWithT(t)
	var newHolder string
	g.Eventually(func(g Gomega) {
		newHolder = leaseHolder(g)
		g.Expect(newHolder).NotTo(BeEmpty())
		g.Expect(newHolder).NotTo(Equal(holder))
	}, takeoverBound, 50*time.Millisecond).Should(Succeed(), "the standby takes the Lease")
	takeover := time.Since(killedAt)
	g.Eventually(standby.acquiredLease, hubtest.Within, hubtest.Poll).Should(BeTrue(),
		"the Lease holder %s is not the standby", newHolder)
	t.Logf("takeover: the standby %s holds the Lease %s after the SIGKILL", standby.name, takeover.Round(10*time.Millisecond))
	var firstWrite time.Duration
	g.Eventually(func(g Gomega) {
		at, ok := history.firstWriteAfter(killedAt.Add(time.Second)) // the dead leader's last requests are done by then
		g.Expect(ok).To(BeTrue())
		firstWrite = at.Sub(killedAt)
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "the new leader writes Deployments")
	t.Logf("the new leader's first Deployment write came %s after the SIGKILL", firstWrite.Round(10*time.Millisecond))
}

// expectLastChangeLands makes a last change to every Widget, once the
// standby leads, and waits until every Widget has converged on it; it returns
// the Widgets.
func expectLastChangeLands(ctx context.Context, t *testing.T, member *fleet.ControlPlane, flood *floodResult) *v1alpha1.WidgetList {
	t.Helper()
	g := NewWithT(t)
	final := int32(flood.rounds + 1)
	lastChange := time.Now()
	g.Expect(fleet.Parallel(floodWidgets, floodWriters, func(i int) error {
		return patchWidget(ctx, member.Client, fleet.WidgetName("w", i), fmt.Sprintf(`{"spec":{"replicas":%d,"image":%q}}`, final, finalImage))
	})).To(Succeed())
	widgets := &v1alpha1.WidgetList{}
	g.Eventually(func(g Gomega) {
		g.Expect(member.Client.List(ctx, widgets, client.InNamespace(floodNS))).To(Succeed())
		g.Expect(widgets.Items).To(HaveLen(floodWidgets))
		for _, w := range widgets.Items {
			key := types.NamespacedName{Namespace: floodNS, Name: w.Name}
			d := hubtest.Deployment(g, member, key)
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To(final)), "Deployment %s", w.Name)
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(finalImage), "Deployment %s", w.Name)
			g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation), "Widget %s", w.Name)
			g.Expect(hubtest.ReadyCondition(&w)).NotTo(BeNil(), "Widget %s", w.Name)
			g.Expect(hubtest.ReadyCondition(&w).ObservedGeneration).To(Equal(w.Generation), "Widget %s", w.Name)
		}
	}, convergeBound, hubtest.Poll).Should(Succeed(), "every Widget converges under the new leader")
	t.Logf("the last change to all %d Widgets landed %s after it was made", floodWidgets, time.Since(lastChange).Round(10*time.Millisecond))
	return widgets
}

// expectOneWriterInOrder checks each Deployment of widgets: one field
// manager, and a generation per spec it was written with (writes), each newer
// than the last, after rounds rounds of the flood.
func expectOneWriterInOrder(t *testing.T, member *fleet.ControlPlane, widgets *v1alpha1.WidgetList, writes map[string][]deploymentSpec, rounds int) {
	t.Helper()
	g := NewWithT(t)
	var deploymentGenerations, widgetGenerations int64
	for _, w := range widgets.Items {
		// Created at replicas 1, one change per later round, and the last change.
		g.Expect(w.Generation).To(Equal(int64(rounds)+1), "Widget %s: the flood's changes", w.Name)
		d := hubtest.Deployment(g, member, types.NamespacedName{Namespace: floodNS, Name: w.Name})
		g.Expect(d.ManagedFields).To(HaveLen(1), "Deployment %s: %v", w.Name, d.ManagedFields)
		g.Expect(d.ManagedFields[0].Manager).To(Equal(widgetreconciler.FieldManager))
		g.Expect(d.ManagedFields[0].Operation).To(Equal(metav1.ManagedFieldsOperationApply))
		specs := writes[w.Name]
		g.Expect(specs).NotTo(BeEmpty(), "Deployment %s: no write seen", w.Name)
		for i := 1; i < len(specs); i++ {
			g.Expect(specs[i].generation).To(Equal(specs[i-1].generation+1), "Deployment %s: a generation the watch missed", w.Name)
			g.Expect(specs[i].replicas).To(BeNumerically(">", specs[i-1].replicas),
				"Deployment %s went from %d to %d replicas: an older spec written over a newer one", w.Name, specs[i-1].replicas, specs[i].replicas)
		}
		g.Expect(specs[0].generation).To(Equal(int64(1)), "Deployment %s", w.Name)
		g.Expect(d.Generation).To(Equal(int64(len(specs))), "Deployment %s: generations the spec changes do not explain", w.Name)
		g.Expect(d.Generation).To(BeNumerically("<=", w.Generation), "Deployment %s written more often than its Widget changed", w.Name)
		deploymentGenerations += d.Generation
		widgetGenerations += w.Generation
	}
	t.Logf("%d Widget generations made %d Deployment generations (the rest coalesced in the queue)", widgetGenerations, deploymentGenerations)
}

// expectLeaseReleasedOnStop sends SIGTERM to the leader p and checks that it
// stops and releases the Lease on its way out.
func expectLeaseReleasedOnStop(t *testing.T, p *managerProcess) {
	t.Helper()
	g := NewWithT(t)
	stopping := time.Now()
	g.Expect(p.Signal(syscall.SIGTERM)).To(Succeed())
	select {
	case <-p.Exited():
	case <-time.After(time.Minute):
		t.Fatalf("%s did not stop within a minute of SIGTERM", p.name)
	}
	g.Expect(p.Err()).NotTo(HaveOccurred(), "%s exit", p.name)
	g.Expect(leaseHolder(g)).To(BeEmpty(), "the stopped leader still holds the Lease")
	t.Logf("SIGTERM: %s stopped and released the Lease in %s", p.name, time.Since(stopping).Round(10*time.Millisecond))
}

// leaseLogLines splits the process's log at the line where client-go's
// leader election says it acquired the processes' Lease (klog, through the
// manager's zap logger): before is all of it when it never did.
func (p *managerProcess) leaseLogLines() (before string, acquired bool) {
	lock := failoverNS + "/" + app.LeaderElectionID
	var b strings.Builder
	for line := range strings.Lines(p.Log()) {
		if strings.Contains(strings.ToLower(line), "successfully acquired lease") && strings.Contains(line, lock) {
			return b.String(), true
		}
		b.WriteString(line)
	}
	return b.String(), false
}

func (p *managerProcess) acquiredLease() bool {
	_, acquired := p.leaseLogLines()
	return acquired
}

// writesBeforeLease counts the Deployments the process wrote before its log
// says it acquired the Lease (all of them when it never did).
func (p *managerProcess) writesBeforeLease() int {
	before, _ := p.leaseLogLines()
	return strings.Count(before, `"msg":"Created Deployment"`) + strings.Count(before, `"msg":"Updated Deployment"`)
}

// leaseHolder is the holder of the processes' Lease: in their registration
// namespace, as app.New configures leader election.
func leaseHolder(g Gomega) string {
	lease := &coordinationv1.Lease{}
	g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: failoverNS, Name: app.LeaderElectionID}, lease)).To(Succeed())
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// waitForLeader waits until one of procs holds the Lease and says so in its
// log, and returns it, the other, and the Lease's holder identity.
func waitForLeader(t *testing.T, procs []*managerProcess) (leader, standby *managerProcess, holder string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		holder = leaseHolder(g)
		g.Expect(holder).NotTo(BeEmpty())
		var leaders []*managerProcess
		for _, p := range procs {
			select {
			case <-p.Exited():
				g.Expect(p.Err()).To(BeNil(), "manager %s exited", p.name)
			default:
			}
			if p.acquiredLease() {
				leaders = append(leaders, p)
			} else {
				standby = p
			}
		}
		g.Expect(leaders).To(HaveLen(1), "processes that acquired the Lease")
		leader = leaders[0]
	}, 2*time.Minute, hubtest.Poll).Should(Succeed())
	return leader, standby, holder
}

// floodResult is what runFlood did; read its fields only after it returned,
// roundsDone at any time.
type floodResult struct {
	mu              sync.Mutex
	done            int
	rounds          int // the last round, and the Widgets' replicas then
	roundsAfterKill int
	err             error
}

func (f *floodResult) roundsDone() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// runFlood creates floodWidgets Widgets at replicas 1 (round 1) and then,
// every floodRoundEvery, raises every Widget's replicas by one, until
// floodAfterKill after the time killed delivers.
func runFlood(ctx context.Context, c client.Client, killed <-chan time.Time, result *floodResult) {
	err := fleet.CreateWidgets(ctx, c, floodNS, "w", floodWidgets, floodWriters)
	result.rounds = 1
	var killedAt time.Time
	for err == nil && ctx.Err() == nil {
		select {
		case killedAt = <-killed:
		default:
		}
		if !killedAt.IsZero() && time.Since(killedAt) >= floodAfterKill {
			break
		}
		if !killedAt.IsZero() {
			result.roundsAfterKill++
		}
		start := time.Now()
		replicas := result.rounds + 1
		err = fleet.Parallel(floodWidgets, floodWriters, func(i int) error {
			return patchWidget(ctx, c, fleet.WidgetName("w", i), fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
		})
		result.rounds = replicas
		result.mu.Lock()
		result.done = replicas
		result.mu.Unlock()
		if replicas >= v1alpha1.MaxWidgetReplicas-1 {
			err = errors.New("the flood ran out of replicas: the kill never came")
		}
		select {
		case <-time.After(time.Until(start.Add(floodRoundEvery))):
		case <-ctx.Done():
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	result.err = err
}

func patchWidget(ctx context.Context, c client.Client, name, patch string) error {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: floodNS, Name: name}}
	if err := c.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("patch Widget %s: %w", name, err)
	}
	return nil
}

// deploymentSpec is one generation of a Deployment as a watch saw it.
type deploymentSpec struct {
	generation int64
	replicas   int32
	seen       time.Time
}

// deploymentHistory records every generation of every Deployment of a namespace.
type deploymentHistory struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	specs  map[string][]deploymentSpec
	err    error
}

// firstWriteAfter is when the watch first saw a new generation after t.
func (h *deploymentHistory) firstWriteAfter(t time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var first time.Time
	for _, specs := range h.specs {
		for _, s := range specs {
			if s.seen.After(t) && (first.IsZero() || s.seen.Before(first)) {
				first = s.seen
			}
		}
	}
	return first, !first.IsZero()
}

// watchDeployments records each new generation of the Deployments in
// namespace of cp until stop, from a watch that resumes where it broke.
func watchDeployments(ctx context.Context, t *testing.T, cp *fleet.ControlPlane, namespace string) *deploymentHistory {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) > 0 {
		t.Fatalf("%d Deployments in %s before the test", len(list.Items), namespace)
	}
	ctx, cancel := context.WithCancel(ctx)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.AppsV1().Deployments(namespace).Watch(ctx, opts)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &deploymentHistory{cancel: cancel, done: make(chan struct{}), specs: map[string][]deploymentSpec{}}
	go func() {
		defer close(h.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					h.err = errors.New("the Deployment watch ended")
					return
				}
				d, isDeployment := ev.Object.(*appsv1.Deployment)
				if !isDeployment {
					if ev.Type == watch.Error {
						h.err = fmt.Errorf("Deployment watch: %v", ev.Object)
						return
					}
					continue
				}
				h.mu.Lock()
				specs := h.specs[d.Name]
				if n := len(specs); n == 0 || specs[n-1].generation != d.Generation {
					h.specs[d.Name] = append(specs, deploymentSpec{generation: d.Generation, replicas: ptr.Deref(d.Spec.Replicas, -1), seen: time.Now()})
				}
				h.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// stop ends the watch and returns what it saw, by Deployment name, and why
// it ended early if it did.
func (h *deploymentHistory) stop() (map[string][]deploymentSpec, error) {
	h.cancel()
	<-h.done
	return h.specs, h.err
}
