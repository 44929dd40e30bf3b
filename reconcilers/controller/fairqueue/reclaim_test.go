package fairqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// fleet plays a controller's workers on goroutines, each processing a request
// with the context Queue.Context gives it, as a reconcile would. The members
// named "silent-..." answer each request after a moment until they go silent;
// from then on their requests in flight and new ones are never answered (the
// calls of a reconcile to a black-holed member return only when its context
// ends), so they hold their workers until the queue takes them back. Requests
// of any other member are answered at once and reported on served.
type fleet struct {
	q        *Queue
	silenced chan struct{}
	// answered counts the silent members' requests answered before they went
	// silent; hanging, those held unanswered now; reclaimed, those whose
	// context the queue cancelled.
	answered, hanging, reclaimed atomic.Int64
	served                       chan mcreconcile.Request
	// silenceAt is the answer after which the silent members go silent:
	// counted by the workers themselves, so that no member can drain its
	// backlog while a test waits to silence them.
	silenceAt int64
}

// startFleet starts workers workers on q; they stop when t ends.
func startFleet(t *testing.T, q *Queue, workers int, silenceAt int64) *fleet {
	t.Helper()
	f := &fleet{q: q, silenced: make(chan struct{}), served: make(chan mcreconcile.Request, 100), silenceAt: silenceAt}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel() // ends every hanging request
		q.ShutDown()
		wg.Wait()
	})
	for range workers {
		wg.Go(func() { f.work(ctx) })
	}
	return f
}

func (f *fleet) work(parent context.Context) {
	for {
		r, shutdown := f.q.Get()
		if shutdown {
			return
		}
		ctx, release := f.q.Context(parent, r)
		if strings.HasPrefix(string(r.ClusterName), "silent-") {
			select {
			case <-f.silenced:
				f.hanging.Add(1)
				<-ctx.Done()
				f.hanging.Add(-1)
				if errors.Is(context.Cause(ctx), ErrWorkerReclaimed) {
					f.reclaimed.Add(1)
				}
			case <-time.After(50 * time.Microsecond):
				if f.answered.Add(1) == f.silenceAt {
					close(f.silenced)
				}
			}
		} else {
			f.served <- r
		}
		release()
		f.q.Done(r)
	}
}

// inFlight returns how many requests each of the members named prefix0 to
// prefix<n-1> has in flight.
func inFlight(q *Queue, prefix string, n int) []int {
	held := make([]int, n)
	for i := range held {
		_, held[i] = q.MemberLen(multicluster.ClusterName(fmt.Sprint(prefix, i)))
	}
	return held
}

// expectServedNow fails t unless want is handed out and reported on served
// within waitForDeadline of real time, the queue's clock standing still.
func (f *fleet) expectServedNow(t *testing.T, want mcreconcile.Request) {
	t.Helper()
	select {
	case r := <-f.served:
		if r != want {
			t.Fatalf("served %v, want %v", r, want)
		}
	case <-time.After(waitForDeadline):
		t.Fatalf("%v not handed out within %s while the silent members hold every worker (%d hanging, %d reclaimed)",
			want, waitForDeadline, f.hanging.Load(), f.reclaimed.Load())
	}
}

// 2, 8 and 40 members, each with 2,000 requests queued, answer until they go
// silent at the same moment, holding every worker between them (each as many
// as it held then, up to its bound): a quiet member's request waits no longer
// than ReclaimAfter on the queue's clock, and once they have held every
// worker for ReclaimAfter, a quiet member's request is handed out at once.
// The queue takes back one worker for each, and one for each silent member
// that held nothing when it went silent, no more. Without reclaiming, the
// quiet member waits as long as the silent members hold on.
func TestQuietMemberGetsAWorkerHoweverManyMembersGoSilentAtOnce(t *testing.T) {
	const workers, perMember, backlog = 32, 24, 2000 // the operator's defaults
	for _, c := range []struct {
		members  int
		reclaims bool
	}{{2, false}, {2, true}, {8, true}, {40, true}} {
		t.Run(fmt.Sprintf("members=%d,reclaim=%v", c.members, c.reclaims), func(t *testing.T) {
			q, clk := newTestQueueWith(t, Options{MaxInFlightPerMember: perMember, Workers: workers})
			if !c.reclaims {
				q.mu.Lock()
				q.workers = 0 // never starving
				q.mu.Unlock()
			}
			// Silent halfway through their backlogs: every member still has
			// requests queued, and the workers are spread over them. The
			// backlogs are queued before the workers start: otherwise the
			// first members could be drained while the test still adds the
			// others' requests, and go silent holding nothing.
			for i := range c.members {
				addN(q, fmt.Sprint("silent-", i), backlog)
			}
			f := startFleet(t, q, workers, int64(c.members*backlog/2))
			<-f.silenced
			// Their requests in flight hang, and so do the ones the workers
			// take after, up to the silent members' bounds.
			waitFor(t, "the workers to hold silent members' requests or wait on their bound", func() bool {
				return f.hanging.Load() == workers || int(f.hanging.Load())+blockedInGet() == workers
			})
			held := inFlight(q, "silent-", c.members)
			t.Logf("the silent members hold %d of %d workers: %v", f.hanging.Load(), workers, held)

			// A quiet member's change, as they go silent: its worker is
			// taken back once every worker has been busy for ReclaimAfter.
			q.Add(req("quiet", "0"))
			if !c.reclaims {
				if f.hanging.Load() != workers {
					t.Fatalf("the silent members hold %d of %d workers: the test shows nothing", f.hanging.Load(), workers)
				}
				clk.Step(time.Hour)
				select {
				case r := <-f.served:
					t.Fatalf("without reclaiming, %v was handed out: the test shows nothing", r)
				case <-time.After(100 * time.Millisecond):
				}
				return
			}
			if f.hanging.Load() != workers {
				t.Fatalf("the silent members hold %d of %d workers: the test shows nothing", f.hanging.Load(), workers)
			}
			waitForTimer(t, clk) // the reclaiming loop's
			select {
			case r := <-f.served:
				t.Fatalf("%v handed out before ReclaimAfter passed: a worker came free?", r)
			default:
			}
			clk.Step(DefaultReclaimAfter)
			f.expectServedNow(t, req("quiet", "0"))

			// Its worker goes back to a silent member, or waits on their
			// bound; once every worker has been busy for ReclaimAfter, a
			// quiet member's change is handed out at once.
			waitFor(t, "the quiet member's worker to settle", func() bool {
				return f.hanging.Load() == workers || blockedInGet() == 1
			})
			clk.Step(DefaultReclaimAfter)
			q.Add(req("quiet", "1"))
			f.expectServedNow(t, req("quiet", "1"))

			// A silent member that held nothing when it went silent looks
			// quiet until its first request hangs: it may have one worker
			// reclaimed for it too, once.
			idle := 0
			for _, n := range held {
				if n == 0 {
					idle++
				}
			}
			if n := f.reclaimed.Load(); n > int64(2+idle) {
				t.Errorf("%d requests reclaimed for two requests of a quiet member and %d silent members that held nothing", n, idle)
			}
		})
	}
}

// reclaimPool is a pool whose requests are processed with their
// Queue.Context, so that a test sees which ones the queue reclaimed.
type reclaimPool struct {
	*pool
	ctx map[mcreconcile.Request]context.Context
}

func newReclaimPool(t *testing.T, workers, perMember int) (*reclaimPool, *clockStepper) {
	t.Helper()
	p, clk := newPool(t, workers, perMember)
	return &reclaimPool{pool: p, ctx: map[mcreconcile.Request]context.Context{}}, &clockStepper{t: t, q: p.q, clk: clk}
}

func (p *reclaimPool) fill() []mcreconcile.Request {
	got := p.pool.fill()
	for _, r := range got {
		ctx, release := p.q.Context(context.Background(), r)
		p.t.Cleanup(release)
		p.ctx[r] = ctx
	}
	return got
}

// reclaimed returns the requests in flight whose context the queue cancelled.
func (p *reclaimPool) reclaimed() []mcreconcile.Request {
	var out []mcreconcile.Request
	for _, r := range p.inFlight {
		if errors.Is(context.Cause(p.ctx[r]), ErrWorkerReclaimed) {
			out = append(out, r)
		}
	}
	return out
}

// clockStepper steps the fake clock of a queue and waits until its
// reclaiming loop has looked again.
type clockStepper struct {
	t   *testing.T
	q   *Queue
	clk interface {
		Step(time.Duration)
		HasWaiters() bool
	}
}

// step moves the clock by d once the reclaiming loop armed its timer.
func (s *clockStepper) step(d time.Duration) {
	s.t.Helper()
	waitFor(s.t, "the reclaiming loop to arm its timer", s.clk.HasWaiters)
	s.clk.Step(d)
}

// While workers come free, however slowly, nothing is reclaimed: a quiet
// member waits its turn. Once none has come free for ReclaimAfter, the
// request held longest is reclaimed, its worker goes to the quiet member
// although others come before it in the round, and the member whose
// request it was counts as unresponsive until it answers again.
func TestReclaimTakesTheLongestHeldOnlyWhenNoWorkerComesFree(t *testing.T) {
	const workers, perMember = 4, 3
	p, clk := newReclaimPool(t, workers, perMember)
	addN(p.q, "a", 10)
	addN(p.q, "b", 10)
	p.fill()              // a/0 b/0 a/1 b/1
	p.done(req("a", "0")) // both answer: neither is unresponsive
	p.fill()              // a/2
	p.done(req("b", "0"))
	p.fill() // b/2
	p.q.Add(req("c", "0"))

	// A worker comes free within each ReclaimAfter: it goes to a, whose
	// turn comes before c's, and nothing is reclaimed.
	clk.step(DefaultReclaimAfter - time.Millisecond)
	p.done(req("a", "2"))
	if got := p.fill(); !slices.Equal(got, []mcreconcile.Request{req("a", "3")}) {
		t.Fatalf("handed out %v, want a/3 (a's turn)", got)
	}
	clk.step(DefaultReclaimAfter - time.Millisecond)
	waitFor(t, "the reclaiming loop to look again", clk.clk.HasWaiters)
	if r := p.reclaimed(); len(r) != 0 {
		t.Fatalf("reclaimed %v although a worker came free %s ago", r, DefaultReclaimAfter-time.Millisecond)
	}

	// None comes free for ReclaimAfter: a/1, held longest, is reclaimed;
	// when its worker is done with it, the worker goes to c.
	clk.step(time.Millisecond)
	waitFor(t, "a request to be reclaimed", func() bool { return len(p.reclaimed()) > 0 })
	if r := p.reclaimed(); !slices.Equal(r, []mcreconcile.Request{req("a", "1")}) {
		t.Fatalf("reclaimed %v, want a/1, the request held longest", r)
	}
	p.done(req("a", "1"))
	if got := p.fill(); !slices.Equal(got, []mcreconcile.Request{req("c", "0")}) {
		t.Fatalf("handed out %v, want c/0", got)
	}
	p.q.mu.Lock()
	silent := p.q.unresponsive(p.q.members["a"], p.q.clock.Now())
	p.q.mu.Unlock()
	if !silent {
		t.Fatal("a, whose request was reclaimed, does not count as unresponsive")
	}
	// It counts as answering again once it answers in time.
	p.done(req("a", "3"))
	p.q.mu.Lock()
	silent = p.q.unresponsive(p.q.members["a"], p.q.clock.Now())
	p.q.mu.Unlock()
	if silent {
		t.Fatal("a still counts as unresponsive after answering a request")
	}
}

// A request reclaimed before its worker asked for its context gets one that
// is cancelled already; a request the queue does not hold gets one it never
// cancels.
func TestContextOfAReclaimedRequestIsCancelled(t *testing.T) {
	q, clk := newTestQueueWith(t, Options{Workers: 1})
	addN(q, "a", 1)
	r := mustGet(t, q)
	q.Add(req("b", "0"))
	waitForTimer(t, clk)
	clk.Step(DefaultReclaimAfter)
	waitFor(t, "a/0 to be reclaimed", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.entries[r].reclaimed
	})
	ctx, release := q.Context(context.Background(), r)
	defer release()
	if !errors.Is(context.Cause(ctx), ErrWorkerReclaimed) {
		t.Fatalf("the context of a reclaimed request ends with %v, want ErrWorkerReclaimed", context.Cause(ctx))
	}
	other, release2 := q.Context(context.Background(), req("z", "0"))
	defer release2()
	if other.Err() != nil {
		t.Fatalf("the context of a request not in flight is done: %v", other.Err())
	}
	q.Done(r)
	expectGet(t, q, req("b", "0"))
}

// Cancel ends the context of a request in flight with its cause, whether
// the worker asked for that context before or after; it cancels nothing for
// a request not in flight; the request added meanwhile is queued again on
// Done; and it neither reclaims nor makes the member silent, however long
// the request was held.
func TestCancelEndsTheContextOfARequestInFlight(t *testing.T) {
	gone := errors.New("its object is gone")
	q, clk := newTestQueueWith(t, Options{Workers: 4})
	q.Add(req("a", "0"))
	q.Add(req("b", "0"))
	before, after := mustGet(t, q), mustGet(t, q)

	if q.Cancel(req("z", "0"), gone) {
		t.Fatal("Cancel reports a request the queue does not hold as cancelled")
	}
	ctxBefore, releaseBefore := q.Context(context.Background(), before)
	defer releaseBefore()
	q.Add(before) // its object's delete event queues it again
	for _, r := range []mcreconcile.Request{before, after} {
		if !q.Cancel(r, gone) {
			t.Fatalf("Cancel reports %v, in flight, as not cancelled", r)
		}
	}
	if q.Cancel(before, gone) {
		t.Fatal("Cancel reports a request cancelled already as cancelled again")
	}
	ctxAfter, releaseAfter := q.Context(context.Background(), after)
	defer releaseAfter()
	for name, ctx := range map[string]context.Context{"asked before": ctxBefore, "asked after": ctxAfter} {
		if !errors.Is(context.Cause(ctx), gone) {
			t.Fatalf("the context %s Cancel ends with %v, want its cause", name, context.Cause(ctx))
		}
	}

	// Held past StallAfter: done so late, a request not cancelled would
	// leave its member silent.
	clk.Step(DefaultStallAfter)
	q.Done(before)
	q.Done(after)
	expectGet(t, q, before)
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.members["a"]; m.silent || q.reclaiming != 0 {
		t.Fatalf("after Cancel: a silent %v, %d reclaiming; want neither", m.silent, q.reclaiming)
	}
	if _, held := q.members["b"]; held {
		t.Fatal("the queue still holds b, whose one request was cancelled and done")
	}
	if e := q.entries[before]; e.cancelled != nil {
		t.Fatalf("the request handed out again still carries the cancel of its last run: %v", e.cancelled)
	}
}
