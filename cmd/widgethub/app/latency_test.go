//go:build scenarios

package app_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	"github.com/widgethub/widgethub/reconcilers/controller"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The scenarios of the shared queue's promises measured in time: how fast a
// healthy member is served while others hang, fail, slow down or go silent
// with their backlogs. They run in make test-scenarios, without the race
// detector and beside no other suite, where the figures measure the hub.

// Several members stop answering while they have work queued: gamma and
// alpha twice (two registrations of alpha's API server through two
// proxies), 24 changed Widgets each. First their API servers hold every
// request but watches (the hub sees the changes and its reconciles wait on
// their writes), then every connection, open or new. Between them they hold
// one member's bound of the hub's workers, not all of them: beta's new
// Widget is reconciled within 5s and its changes as fast as before. They
// turn Unreachable within 30s, and once they answer again every Widget
// changed meanwhile is reconciled within 10s.
func TestMembersThatStopAnsweringLeaveWorkersToHealthyOnes(t *testing.T) {
	const widgets = 24
	g := NewWithT(t)
	alpha, beta, gamma := testFleet.Member("alpha"), testFleet.Member("beta"), testFleet.Member("gamma")
	bound := documentedPerMemberBound(t, managerOptions())
	withoutDirectRegistration(t, "alpha", alpha)
	withoutDirectRegistration(t, "gamma", gamma)
	hubtest.Register(t, "beta", beta)
	hubtest.ExpectMemberReady(t, "beta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	faulty := []*proxiedMember{
		registerThroughProxy(t, "stall-gamma", gamma),
		registerThroughProxy(t, "stall-alpha-1", alpha),
		registerThroughProxy(t, "stall-alpha-2", alpha),
	}
	gammaKeys, alphaKeys := widgetsOf(t, gamma, widgets), widgetsOf(t, alpha, widgets)
	probe := betaProbe(t, "partial-probe")
	baseline, baselineSamples := medianChangeLatency(t, beta, probe, latencySamples, latencySpacing)

	// The members hold every request but watches; their Widgets change.
	start := time.Now()
	for _, m := range faulty {
		m.proxy.Set(fleet.Fault{BlackHole: true, Match: fleet.NotWatch})
	}
	setAllReplicas(t, gamma, gammaKeys, 2)
	setAllReplicas(t, alpha, alphaKeys, 2)
	g.Eventually(func() int { return heldApplies(faulty...) }, hubtest.Within, 20*time.Millisecond).Should(BeNumerically(">=", bound),
		"the hanging members' Deployment writes held by their proxies")
	hungAfter := time.Since(start)

	// A healthy member's new Widget and changes go through meanwhile.
	created := time.Now()
	fresh := types.NamespacedName{Namespace: "shop", Name: "partial-fresh"}
	hubtest.CreateWidget(t, beta, fresh.Namespace, fresh.Name, 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, beta, fresh) }, 5*time.Second, 20*time.Millisecond).Should(Succeed(),
		"beta's new Widget waited behind members that do not answer (%d writes held)", heldApplies(faulty...))
	freshTook := time.Since(created)
	during, duringSamples := medianChangeLatency(t, beta, probe, latencySamples, latencySpacing)
	held := heldApplies(faulty...)
	unresponsive, _ := hubtest.GaugeValue(g, "widgethub_workqueue_unresponsive_in_flight", "name", "widget")
	active, _ := hubtest.GaugeValue(g, "controller_runtime_active_workers", "controller", "widget")
	t.Logf("hung within %s: %d Deployment writes held (bound %d), %v unresponsive in flight, %v workers active; beta: new Widget in %s, change latency median %s %v (no fault: %s %v)",
		hungAfter.Round(time.Millisecond), held, bound, unresponsive, active, freshTook.Round(time.Millisecond),
		during.Round(time.Millisecond), round(duringSamples), baseline.Round(time.Millisecond), round(baselineSamples))
	// The bound, and one more for each member that hung with nothing in
	// flight once the others had filled it (fairqueue.UnresponsiveBound).
	g.Expect(held).To(BeNumerically("<=", bound+len(faulty)-1), "the members that do not answer hold more workers than one member's bound")
	expectNoSlower(t, during, baseline, "members that hang")

	// Now they take no connection at all; their Widgets change again.
	for _, m := range faulty {
		m.proxy.Set(fleet.Fault{BlackHole: true})
	}
	setAllReplicas(t, gamma, gammaKeys, 3)
	setAllReplicas(t, alpha, alphaKeys, 3)
	for _, m := range faulty {
		hubtest.ExpectMemberReady(t, m.name, metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)
	}
	toUnreachable := time.Since(start)
	g.Expect(toUnreachable).To(BeNumerically("<", 30*time.Second), "Unreachable must show within 30s")

	// They answer again: everything changed meanwhile is reconciled.
	lifted := time.Now()
	for _, m := range faulty {
		m.proxy.Clear()
	}
	expectAllReplicas(t, gamma, gammaKeys, 3, 10*time.Second)
	expectAllReplicas(t, alpha, alphaKeys, 3, 10*time.Second)
	caughtUp := time.Since(lifted)
	for _, m := range faulty {
		hubtest.ExpectMemberReady(t, m.name, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	}
	t.Logf("Unreachable %s after the first fault; every Widget changed meanwhile reconciled %s after they answered again, Engaged after %s",
		toUnreachable.Round(time.Millisecond), caughtUp.Round(time.Millisecond), time.Since(lifted).Round(time.Millisecond))
}

// One member's 429 storm (every write refused with Retry-After: 1, which
// client-go retries ten times), its 500s on every write, a TCP reset for
// every write, or 2s of latency on each of its writes (its reads, probes and
// watches as fast as ever), each
// met while 64 of its Widgets change: beta's changes take no longer than
// without the fault (within 2x of the median measured just before, see
// slowerLimit); gamma never holds more than its bound of workers nor retries
// beyond its budget, and catches up once the fault ends.
func TestErrorsAndLatencyFromOneMemberDoNotSlowOthers(t *testing.T) {
	// Twice as many Widgets as workers: a fault that holds a worker per
	// Widget (every write retried for 10s after 429s, or 2s per write) would
	// hold every worker, for two rounds, but for the bounds.
	const widgets = 64
	gamma, beta := testFleet.Member("gamma"), testFleet.Member("beta")
	bound := documentedPerMemberBound(t, managerOptions())
	withoutDirectRegistration(t, "gamma", gamma)
	hubtest.Register(t, "beta", beta)
	hubtest.ExpectMemberReady(t, "beta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	faulty := registerThroughProxy(t, "erring-gamma", gamma)
	keys := widgetsOf(t, gamma, widgets)
	probe := betaProbe(t, "erring-probe")

	replicas := int32(1)
	for _, c := range []struct {
		name  string
		fault fleet.Fault
		// writesFail is set when the fault keeps the member's Deployments from changing.
		writesFail bool
	}{
		{"429", fleet.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Match: fleet.Writes}, true},
		{"500", fleet.Fault{Status: http.StatusInternalServerError, Match: fleet.Writes}, true},
		// Each write resets its connection, and with it every request and
		// watch that shares it (HTTP/2).
		{"reset", fleet.Fault{Reset: true, Match: fleet.Writes}, true},
		{"latency", fleet.Fault{Latency: 2 * time.Second, Match: fleet.Writes}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			baseline, baselineSamples := medianChangeLatency(t, beta, probe, latencySamples, latencySpacing)
			_, faultedBefore := faulty.proxy.Requests()
			errorsBefore := hubtest.CounterSum(g, "widgethub_member_reconcile_errors_total", "cluster", faulty.name)
			faulty.proxy.Set(c.fault)
			set := time.Now()
			replicas++
			setAllReplicas(t, gamma, keys, replicas)
			changed := time.Now()
			// Beta is measured once the fault meets the member's first wave
			// of reconciles.
			g.Eventually(func() int64 { _, n := faulty.proxy.Requests(); return n - faultedBefore }, hubtest.Within, 20*time.Millisecond).
				Should(BeNumerically(">=", widgets/2))
			peakWorkers := watchActiveWorkers(t)
			during, duringSamples := medianChangeLatency(t, beta, probe, latencySamples, latencySpacing)
			peak := peakWorkers()
			failed := hubtest.CounterSum(g, "widgethub_member_reconcile_errors_total", "cluster", faulty.name) - errorsBefore
			elapsed := time.Since(set)
			seen, faulted := faulty.proxy.Requests()
			t.Logf("beta's change latency: median %s %v with %s on gamma (%d of its requests met the fault, %d in all; %v of its reconciles failed in %s; at most %d workers busy), %s %v without",
				during.Round(time.Millisecond), round(duringSamples), c.name, faulted-faultedBefore, seen, failed, elapsed.Round(time.Millisecond), peak,
				baseline.Round(time.Millisecond), round(baselineSamples))
			// gamma's bound, and beta's one change at a time.
			g.Expect(peak).To(BeNumerically("<=", bound+1), "gamma held more workers than its bound")
			// Each Widget's reconcile after its change (twice, should an
			// event add it again), and the retries gamma's budget allows.
			retries := controller.MemberRetryBurst + controller.MemberRetryRate*elapsed.Seconds()
			g.Expect(failed).To(BeNumerically("<=", 2*widgets+retries), "gamma's failed reconciles were retried beyond its budget")
			expectNoSlower(t, during, baseline, c.name+" on gamma")
			if c.writesFail {
				list := &appsv1.DeploymentList{}
				g.Expect(gamma.Client.List(context.Background(), list, client.InNamespace(partialNS))).To(Succeed())
				for _, d := range list.Items {
					g.Expect(ptr.Deref(d.Spec.Replicas, -1)).NotTo(Equal(replicas), "Deployment %s changed through a fault that refuses writes", d.Name)
				}
			} else {
				expectAllReplicas(t, gamma, keys, replicas, hubtest.Within)
				t.Logf("gamma reconciled its %d changes in %s with %s on", widgets, time.Since(changed).Round(time.Millisecond), c.name)
			}

			cleared := time.Now()
			faulty.proxy.Clear()
			expectAllReplicas(t, gamma, keys, replicas, hubtest.Within)
			t.Logf("gamma caught up %s after the fault ended", time.Since(cleared).Round(time.Millisecond))
		})
	}
}

// slowerLimit is how slow beta's median change latency may be during a
// fault: twice the median without it, and never less than latencySlack above it.
func slowerLimit(baseline time.Duration) time.Duration {
	return max(2*baseline, baseline+latencySlack)
}

// expectNoSlower fails the test when beta's median change latency during a
// fault (during) exceeds slowerLimit of the one without it (baseline).
// These are scenarios (make test-scenarios): run without the race detector
// and beside no other suite, where the figure measures the hub.
func expectNoSlower(t *testing.T, during, baseline time.Duration, fault string) {
	t.Helper()
	NewWithT(t).Expect(during).To(BeNumerically("<=", slowerLimit(baseline)),
		"beta's changes are slower with %s: median %s, %s without", fault, during, baseline)
}

// Members that were busy when they went silent: two, then eight
// registrations of alpha's and gamma's API servers (through proxies of their
// own; each sees the 1,000 Widgets of its API server) answer every write
// 300ms late while all their Widgets change, so that each has a large
// backlog and between them they hold every worker as members that answer;
// then all go silent at the same moment (every request but watches held).
// They keep every worker (or as many as the bound of unresponsive members
// lets them take, when the queue sees some of them unanswered first), yet
// beta's new Widget, and each of its changes after, is reconciled within a
// second: the queue takes a worker back for beta
// (fairqueue.DefaultReclaimAfter after the last one was taken).
func TestMembersBusyWhenTheyGoSilentTogetherLeaveAWorkerToQuietOnes(t *testing.T) {
	const widgets, target = 1000, time.Second
	g := NewWithT(t)
	alpha, beta, gamma := testFleet.Member("alpha"), testFleet.Member("beta"), testFleet.Member("gamma")
	documentedPerMemberBound(t, managerOptions())
	const workers = documentedWorkers
	withoutDirectRegistration(t, "alpha", alpha)
	withoutDirectRegistration(t, "gamma", gamma)
	hubtest.Register(t, "beta", beta)
	hubtest.ExpectMemberReady(t, "beta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	var silent []*proxiedMember
	addMembers := func(n int) {
		for i := len(silent); i < n; i++ {
			cp := []*fleet.ControlPlane{gamma, alpha}[i%2]
			silent = append(silent, registerThroughProxy(t, fmt.Sprintf("busy-%s-%d", cp.Name, i/2), cp))
		}
	}
	addMembers(2)
	gammaKeys, alphaKeys := widgetsOf(t, gamma, widgets), widgetsOf(t, alpha, widgets)
	probe := betaProbe(t, "busy-probe")

	for i, n := range []int{2, 8} {
		addMembers(n)
		for _, m := range silent {
			m.proxy.Set(fleet.Fault{Latency: 300 * time.Millisecond, Match: fleet.Writes})
		}
		replicas := int32(2 + i)
		changed := time.Now()
		setAllReplicas(t, gamma, gammaKeys, replicas)
		setAllReplicas(t, alpha, alphaKeys, replicas)
		g.Eventually(func(g Gomega) {
			active, _ := hubtest.GaugeValue(g, "controller_runtime_active_workers", "controller", "widget")
			g.Expect(active).To(BeNumerically(">=", workers))
		}, hubtest.Within, 20*time.Millisecond).Should(Succeed(), "the busy members never held every worker: the test shows nothing")
		ready, _ := hubtest.GaugeValue(g, "widgethub_workqueue_depth", "name", "widget")
		busyFor := time.Since(changed)

		// All go silent at once, holding every worker with their backlogs
		// queued; a second later every write under way has reached the
		// black hole.
		for _, m := range silent {
			m.proxy.Set(fleet.Fault{BlackHole: true, Match: fleet.NotWatch})
		}
		silenced := time.Now()
		time.Sleep(time.Second)
		active, _ := hubtest.GaugeValue(g, "controller_runtime_active_workers", "controller", "widget")
		held := heldApplies(silent...)

		created := time.Now()
		fresh := types.NamespacedName{Namespace: "shop", Name: fmt.Sprintf("busy-fresh-%d", n)}
		hubtest.CreateWidget(t, beta, fresh.Namespace, fresh.Name, 1)
		g.Eventually(func(g Gomega) { hubtest.Deployment(g, beta, fresh) }, 30*time.Second, 10*time.Millisecond).Should(Succeed())
		freshTook := time.Since(created)
		median, samples := medianChangeLatency(t, beta, probe, latencySamples, latencySpacing)
		t.Logf("%d members busy for %s (%v requests queued, every worker theirs); a second after they went silent: %d writes held, %v workers active; beta: new Widget in %s, change latency median %s %v (until %s after)",
			n, busyFor.Round(time.Millisecond), ready, held, active,
			freshTook.Round(time.Millisecond), median.Round(time.Millisecond), round(samples), time.Since(silenced).Round(time.Millisecond))
		g.Expect(freshTook).To(BeNumerically("<=", target), "beta's new Widget waited behind %d members gone silent", n)
		g.Expect(slices.Max(samples)).To(BeNumerically("<=", target), "beta's changes waited behind %d members gone silent: %v", n, round(samples))

		// They answer again and catch up before the next round.
		for _, m := range silent {
			m.proxy.Clear()
		}
		expectAllReplicas(t, gamma, gammaKeys, replicas, 3*time.Minute)
		expectAllReplicas(t, alpha, alphaKeys, replicas, 3*time.Minute)
	}
}
