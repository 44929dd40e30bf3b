package fairqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// pool plays a controller's workers on one goroutine: fill hands out
// requests while fewer than size are in flight and the queue has one to hand
// out, without ever blocking.
type pool struct {
	t        *testing.T
	q        *Queue
	size     int
	inFlight []mcreconcile.Request
}

func newPool(t *testing.T, workers, perMember int) (*pool, *clocktesting.FakeClock) {
	t.Helper()
	q, clk := newTestQueueWith(t, Options{MaxInFlightPerMember: perMember, Workers: workers})
	return &pool{t: t, q: q, size: workers}, clk
}

// answerAtBound queues n requests of member, checks that it takes perMember
// of the workers, and has it answer its request answered: member counts as
// answering. The free worker is filled again.
func (p *pool) answerAtBound(member string, n, perMember int, answered string) {
	p.t.Helper()
	addN(p.q, member, n)
	if got := p.fill(); len(got) != perMember {
		p.t.Fatalf("%s got %d workers, want %d", member, len(got), perMember)
	}
	p.done(req(member, answered))
	p.fill()
}

// fill hands out what the queue lets go with a free worker, and returns it.
func (p *pool) fill() []mcreconcile.Request {
	p.t.Helper()
	var got []mcreconcile.Request
	for len(p.inFlight) < p.size {
		p.q.mu.Lock()
		m := p.q.pick()
		p.q.mu.Unlock()
		if m == nil {
			break
		}
		r := mustGet(p.t, p.q)
		p.inFlight = append(p.inFlight, r)
		got = append(got, r)
	}
	return got
}

// done finishes r, which must be in flight.
func (p *pool) done(r mcreconcile.Request) {
	p.t.Helper()
	i := slices.Index(p.inFlight, r)
	if i < 0 {
		p.t.Fatalf("%v is not in flight", r)
	}
	p.inFlight = slices.Delete(p.inFlight, i, i+1)
	p.q.Done(r)
}

// of counts the requests of cluster in flight.
func (p *pool) of(cluster string) int {
	n := 0
	for _, r := range p.inFlight {
		if string(r.ClusterName) == cluster {
			n++
		}
	}
	return n
}

func addN(q *Queue, cluster string, n int) {
	for i := range n {
		q.Add(req(cluster, fmt.Sprint(i)))
	}
}

func TestUnresponsiveBound(t *testing.T) {
	for _, c := range []struct{ workers, perMember, want int }{
		{0, 0, -1}, {0, 24, -1}, // workers unknown: no bound
		{32, 24, 24},                            // the operator's defaults: a quarter stays free
		{32, 0, 31}, {32, 32, 31}, {32, 40, 31}, // never every worker
		{32, 8, 8}, {1, 1, 0}, {2, 1, 1},
	} {
		if got := UnresponsiveBound(c.workers, c.perMember); got != c.want {
			t.Errorf("UnresponsiveBound(%d, %d) = %d, want %d", c.workers, c.perMember, got, c.want)
		}
	}
}

// Three members stop answering at once, each with a backlog larger than a
// member's bound: between them they get the bound, not every worker, and a
// fourth member is served at once. Without Workers (the rule off) the three
// take every worker and the fourth waits.
func TestMembersThatStopAnsweringTogetherHoldOneBoundBetweenThem(t *testing.T) {
	const workers, perMember = 8, 6
	for _, rule := range []bool{true, false} {
		t.Run(fmt.Sprint("rule=", rule), func(t *testing.T) {
			p, clk := newPool(t, workers, perMember)
			if !rule {
				p.q.maxUnresponsive = -1
			}
			for _, m := range []string{"a", "b", "c"} {
				addN(p.q, m, 10)
			}
			p.fill() // none of it is ever done: a, b and c hang
			hung := p.of("a") + p.of("b") + p.of("c")
			p.q.Add(req("d", "new"))
			served := slices.Contains(p.fill(), req("d", "new"))
			if !rule {
				if hung != workers || served {
					t.Fatalf("without the rule the hanging members hold %d of %d workers and d is served: %v; the test shows nothing", hung, workers, served)
				}
				return
			}
			if hung != perMember {
				t.Fatalf("the hanging members hold %d workers between them (a %d, b %d, c %d), want %d", hung, p.of("a"), p.of("b"), p.of("c"), perMember)
			}
			if !served {
				t.Fatalf("d's request waits while the hanging members hold %d of %d workers", hung, workers)
			}
			// Time changes nothing; a hanging request given up (a deadline)
			// lets one more of theirs go, within the bound.
			clk.Step(time.Minute)
			p.done(req("d", "new"))
			if got := p.fill(); len(got) != 0 {
				t.Fatalf("handed out %v to hanging members at their bound", got)
			}
			p.done(req("a", "0"))
			if got := p.fill(); len(got) != 1 || got[0].ClusterName == "d" {
				t.Fatalf("after a request of a was given up, handed out %v, want one request of a, b or c", got)
			}
			if hung := p.of("a") + p.of("b") + p.of("c"); hung != perMember {
				t.Fatalf("the hanging members hold %d, want %d", hung, perMember)
			}
		})
	}
}

// A member that answers is not held to the bound of the unresponsive ones: a
// busy member keeps its own bound of workers while others hang beside it.
func TestAnsweringMemberKeepsItsWorkersBesideHangingOnes(t *testing.T) {
	const workers, perMember = 20, 8
	p, _ := newPool(t, workers, perMember)
	p.answerAtBound("busy", 100, perMember, "0") // busy answers: its other requests in flight are answered

	addN(p.q, "a", 10)
	addN(p.q, "b", 10)
	p.fill()
	if hung := p.of("a") + p.of("b"); hung != perMember {
		t.Fatalf("a and b, which never answer, hold %d workers, want %d", hung, perMember)
	}
	// busy goes on at its own bound: each request done makes room for its next.
	for i := range 40 {
		oldest := p.inFlight[slices.IndexFunc(p.inFlight, func(r mcreconcile.Request) bool { return r.ClusterName == "busy" })]
		p.done(oldest)
		got := p.fill()
		if len(got) != 1 || got[0].ClusterName != "busy" || p.of("busy") != perMember {
			t.Fatalf("round %d: after one of busy's requests was done, handed out %v with busy at %d in flight; want one of busy's, at %d", i, got, p.of("busy"), perMember)
		}
	}
	if hung := p.of("a") + p.of("b"); hung != perMember {
		t.Fatalf("a and b hold %d workers, want %d", hung, perMember)
	}
}

// A member that answers some requests while one hangs counts as unresponsive
// once that one has been in flight for StallAfter.
func TestMemberWithAStalledRequestIsUnresponsive(t *testing.T) {
	const workers, perMember = 10, 6
	p, clk := newPool(t, workers, perMember)
	p.answerAtBound("a", 20, perMember, "1") // a answers; a/0 will hang
	addN(p.q, "b", workers-perMember)        // b never answers
	p.fill()
	if p.of("a") != perMember || p.of("b") != workers-perMember {
		t.Fatalf("a holds %d, b %d; want %d and %d", p.of("a"), p.of("b"), perMember, workers-perMember)
	}

	// Before StallAfter, a's answers make room for its next requests.
	p.done(req("a", "2"))
	if got := p.fill(); !slices.Equal(got, []mcreconcile.Request{req("a", "7")}) {
		t.Fatalf("handed out %v, want a/7", got)
	}
	// After it, a/0 stalls a: with b, the unresponsive members hold more than
	// the bound, and a's answers make room for nobody but the others.
	clk.Step(DefaultStallAfter)
	p.done(req("a", "3"))
	if got := p.fill(); len(got) != 0 {
		t.Fatalf("handed out %v to unresponsive members beyond their bound", got)
	}
	p.q.Add(req("c", "new"))
	if got := p.fill(); !slices.Equal(got, []mcreconcile.Request{req("c", "new")}) {
		t.Fatalf("handed out %v, want c/new", got)
	}
	// Once a/0 is done (its deadline) and a's others too, a is served again
	// within what b and c leave of the bound.
	p.done(req("a", "0"))
	for _, r := range slices.Clone(p.inFlight) {
		if r.ClusterName == "a" {
			p.done(r)
		}
	}
	got := p.fill()
	if len(got) == 0 || slices.ContainsFunc(got, func(r mcreconcile.Request) bool { return r.ClusterName != "a" }) {
		t.Fatalf("handed out %v, want only a's requests", got)
	}
}

// With requests that hang and requests that are done interleaved at random,
// Gets blocked on the bound are woken whenever they may go on: every request
// of a member that answers is handed out, and the unresponsive members never
// hold more than the bound beyond one request each (a member with nothing in
// flight always gets one).
func TestBoundedWorkersBlockedOnTheBoundWake(t *testing.T) {
	const workers, perMember = 6, 3
	q := NewWithOptions(Options{Name: t.Name(), MaxInFlightPerMember: perMember, Workers: workers})
	defer q.ShutDown()
	hang := make(chan struct{})
	results := make(chan mcreconcile.Request)
	for range workers {
		go func() {
			for {
				r, shutdown := q.Get()
				if shutdown {
					return
				}
				if r.ClusterName != "healthy" {
					<-hang
				}
				q.Done(r)
				if r.ClusterName == "healthy" {
					results <- r
				}
			}
		}()
	}
	addN(q, "hung-a", 5)
	addN(q, "hung-b", 5)
	addN(q, "healthy", 200)
	for range 200 {
		select {
		case <-results:
		case <-time.After(time.Minute):
			t.Fatal("the healthy member's requests stopped being handed out")
		}
	}
	q.mu.Lock()
	held := q.unresponsiveInFlight(q.clock.Now())
	q.mu.Unlock()
	if held > perMember+2 {
		t.Errorf("the hanging members hold %d workers, want at most %d", held, perMember+2)
	}
	close(hang)
	// The workers drain hung-a and hung-b; results has no more readers.
	waitFor(t, "the workers to drain the hanging members' requests", func() bool { return q.Len() == 0 })
}

// Gets blocked on the bound all go on when one Done frees room for several:
// a member that answers stops counting with all its requests in flight.
func TestDoneWakesEveryGetBlockedOnTheBound(t *testing.T) {
	const workers, perMember = 6, 3
	p, _ := newPool(t, workers, perMember)
	addN(p.q, "a", 3)
	addN(p.q, "c", 3)
	if got := p.fill(); !slices.Equal(got, []mcreconcile.Request{req("a", "0"), req("c", "0"), req("a", "1")}) {
		t.Fatalf("handed out %v, want a/0, c/0, a/1 (then a and c are at the bound)", got)
	}
	gets := []<-chan got{getInBackground(p.q), getInBackground(p.q)}
	waitForBlockedGets(t, 2) // both Gets wait on the bound
	waitFor(t, "the queue to know its Gets are capped", func() bool {
		p.q.mu.Lock()
		defer p.q.mu.Unlock()
		return p.q.capped
	})
	p.q.Done(req("a", "0")) // a answers: a/1 is answered, a stops counting
	var handed []mcreconcile.Request
	for _, g := range gets {
		handed = append(handed, receive(t, g))
	}
	slices.SortFunc(handed, func(x, y mcreconcile.Request) int { return strings.Compare(x.String(), y.String()) })
	if !slices.Equal(handed, []mcreconcile.Request{req("a", "2"), req("c", "1")}) {
		t.Fatalf("handed out %v, want a/2 and c/1", handed)
	}
}

// In a queue of one key per member (the registrations'), every request in
// flight is unanswered; with OneKeyPerMember such a request marks its member
// unresponsive only once it stalls, so a silent member that is retried is
// not held back by members merely being served. Without it, it waits for
// every one of them to end.
func TestOneKeyPerMemberCountsOnlyStalledRequests(t *testing.T) {
	const workers, perMember = 6, 2 // the unresponsive bound is 2
	for _, oneKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("OneKeyPerMember=%v", oneKey), func(t *testing.T) {
			q, clk := newTestQueueWith(t, Options{MaxInFlightPerMember: perMember, Workers: workers, OneKeyPerMember: oneKey})
			p := &pool{t: t, q: q, size: workers}
			// s's reconcile ends unanswered (after StallAfter) and is queued
			// again, as a controller retries it: s is silent. Meanwhile three
			// members are being served, none for long.
			q.Add(req("s", "r"))
			p.fill()
			clk.Step(DefaultStallAfter)
			for _, m := range []string{"a", "b", "c"} {
				q.Add(req(m, "r"))
			}
			if got := p.fill(); len(got) != 3 {
				t.Fatalf("handed out %v, want a, b and c", got)
			}
			q.Add(req("s", "r"))
			p.done(req("s", "r"))
			got := p.fill()
			if handed := len(got) == 1; handed != oneKey {
				t.Fatalf("handed out %v while a, b and c were in flight for no time; want s/r handed out: %v", got, oneKey)
			}
			if !oneKey {
				return
			}
			// Once they stall, they count: t, silent too, sits out.
			q.Add(req("t", "r"))
			p.fill()
			clk.Step(DefaultStallAfter)
			q.Add(req("t", "r"))
			p.done(req("t", "r"))
			if got := p.fill(); len(got) != 0 {
				t.Fatalf("handed out %v to a silent member beyond the bound of stalled ones", got)
			}
		})
	}
}
