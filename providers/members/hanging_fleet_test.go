//go:build scenarios

package members_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	"github.com/widgethub/widgethub/providers/members"
)

// probesOf counts the health probes of the member called cluster.
func probesOf(cluster string) uint64 {
	series, _ := hubtest.SeriesLabelled("cluster", cluster)
	var n uint64
	for _, m := range series["widgethub_member_probe_duration_seconds"] {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// hangingRuns counts the runs of TestHangingRegistrationsLeaveWorkers, whose
// registrations are named afresh in each: the engine's queue remembers a
// registration that was cut short until its last retry is done, so names of
// an earlier run (-count=2) would be bounded as hanging from the start.
var hangingRuns int

// Forty registrations whose member passes its checks and then never answers
// its cache's lists (each would hold a registration worker for the whole
// sync timeout) hold a bounded share of the workers once each has been seen
// to hang: then a new healthy member is engaged within 3s, an engaged member
// is probed every probe interval, never more than 2s late, and another whose
// API server goes away is Unreachable within its failure threshold of probes
// (each an interval plus the probe timeout), plus 2s. (While they are new,
// the queue cannot tell them from the newcomer and serves all in arrival
// order, a worker's reclaim after a second each: a newcomer behind 24 of
// them waited two seconds for a worker, see "Workers" in the package
// documentation.)
//
// A scenario (make test-scenarios, without the race detector): under make
// test's race detector, beside the other packages' API servers, its bound on
// the healthy member's probes measured the machine more than the engine (a
// longest gap of 4.19 s against 4 s, at a load average of 10 while the kind
// node image built beside it).
func TestHangingRegistrationsLeaveWorkers(t *testing.T) {
	const (
		hanging      = 40
		engageWithin = 3 * time.Second
		probeSlack   = 2 * time.Second
	)
	alpha, beta, gamma := testFleet.Member("alpha"), testFleet.Member("beta"), testFleet.Member("gamma")
	opts := engineOptions()
	hangingRuns++
	hangingName := func(i int) string { return fmt.Sprintf("hanging-%d-%02d", hangingRuns, i) }
	if members.DefaultConcurrentEngagements >= hanging {
		t.Fatalf("%d hanging registrations do not outnumber the %d workers", hanging, members.DefaultConcurrentEngagements)
	}
	hubtest.RegisterEngaged(t, "fresh", beta)
	down, downKubeconfig := hubtest.TCPProxied(t, beta)
	hubtest.RegisterData(t, "outage", map[string][]byte{"kubeconfig": downKubeconfig})
	t.Cleanup(func() { hubtest.Unregister(t, "outage") })
	hubtest.ExpectMemberReady(t, "outage", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	front, err := fleet.NewHTTPProxy(alpha.Config.Host, alpha.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	front.Set(fleet.Fault{BlackHole: true, Match: cacheLists})
	kubeconfig := hubtest.FrontKubeconfig(t, front, alpha, "widgethub-hanging")

	// fresh's probes, as the times its probe count was seen to grow.
	g := NewWithT(t)
	var mu sync.Mutex
	probes := []time.Time{time.Now()}
	last := probesOf("fresh")
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if n := probesOf("fresh"); n != last {
				last = n
				mu.Lock()
				probes = append(probes, time.Now())
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	for i := range hanging {
		name := hangingName(i)
		hubtest.RegisterData(t, name, map[string][]byte{"kubeconfig": kubeconfig})
		t.Cleanup(func() { hubtest.Unregister(t, name) })
	}
	g.Eventually(func() int { return len(front.Held()) }, hubtest.Within, hubtest.Poll).Should(BeNumerically(">=", members.DefaultConcurrentEngagements),
		"cache lists of the hanging registrations held by the front")
	// Each has been seen to hang: its first engagement was cut short.
	for i := range hanging {
		hubtest.ExpectMemberReady(t, hangingName(i), metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)
	}
	g.Eventually(func() int { return len(front.Held()) }, hubtest.Within, hubtest.Poll).ShouldNot(BeZero(),
		"cache lists of the hanging registrations, tried again, held by the front")

	// A new member, registered while they hang.
	start := time.Now()
	hubtest.Register(t, "newcomer", gamma)
	t.Cleanup(func() { hubtest.Unregister(t, "newcomer") })
	hubtest.ExpectMemberReady(t, "newcomer", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	engaged := time.Since(start)

	// Another member's API server goes away.
	down.Down()
	start = time.Now()
	hubtest.ExpectMemberReady(t, "outage", metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)
	unreachable := time.Since(start)

	// fresh is probed throughout: for two sync timeouts of the hanging ones at least.
	time.Sleep(2*opts.SyncTimeout - time.Since(start))
	close(stop)
	<-stopped
	mu.Lock()
	probes = append(probes, time.Now())
	var worst time.Duration
	for i := 1; i < len(probes); i++ {
		worst = max(worst, probes[i].Sub(probes[i-1]))
	}
	mu.Unlock()
	held := len(front.Held())
	t.Logf("newcomer engaged in %s; outage Unreachable in %s; fresh probed %d times, longest gap %s (interval %s); the front holds %d requests",
		engaged.Round(time.Millisecond), unreachable.Round(time.Millisecond), len(probes)-2, worst.Round(time.Millisecond), opts.ProbeInterval, held)
	if engaged > engageWithin {
		t.Errorf("the new member was engaged in %s, more than %s, while %d registrations hang", engaged.Round(time.Millisecond), engageWithin, hanging)
	}
	if worst > opts.ProbeInterval+probeSlack {
		t.Errorf("an engaged member went %s without a probe (interval %s) while %d registrations hang", worst.Round(time.Millisecond), opts.ProbeInterval, hanging)
	}
	if limit := time.Duration(opts.FailureThreshold)*(opts.ProbeInterval+opts.ProbeTimeout) + probeSlack; unreachable > limit {
		t.Errorf("a member that went away was Unreachable after %s, more than %s, while %d registrations hang", unreachable.Round(time.Millisecond), limit, hanging)
	}
	mc := hubtest.ExpectMemberReady(t, hangingName(0), metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)
	t.Logf("a hanging registration shows: %s", hubtest.ReadyConditionOf(mc).Message)
}
