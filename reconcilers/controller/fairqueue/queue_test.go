package fairqueue

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// req returns the request of object default/name in cluster.
func req(cluster, name string) mcreconcile.Request {
	return mcreconcile.Request{
		ClusterName: multicluster.ClusterName(cluster),
		Request:     reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}},
	}
}

// newTestQueue returns a queue on a fake clock, shut down when the test ends.
func newTestQueue(t *testing.T) (*Queue, *clocktesting.FakeClock) {
	t.Helper()
	return newTestQueueWith(t, Options{})
}

// newTestQueueWith is newTestQueue with the bounds and metrics of o; its
// name, rate limiter (backoff from 1 s to 1 h) and clock are the test's.
func newTestQueueWith(t *testing.T, o Options) (*Queue, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	o.Name = t.Name()
	o.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](time.Second, time.Hour)
	o.Clock = clk
	q := NewWithOptions(o)
	t.Cleanup(q.ShutDown)
	return q, clk
}

// mustGet hands out the next request; it fails the test when the queue shuts down.
func mustGet(t *testing.T, q *Queue) mcreconcile.Request {
	t.Helper()
	r, shutdown := q.Get()
	if shutdown {
		t.Fatal("Get reported shutdown")
	}
	return r
}

// expectGet hands out the next request and checks it is want.
func expectGet(t *testing.T, q *Queue, want mcreconcile.Request) {
	t.Helper()
	if got := mustGet(t, q); got != want {
		t.Fatalf("Get = %v, want %v", got, want)
	}
}

// expectServed hands out want in order, each done at once, and checks that
// the queue is empty afterwards.
func expectServed(t *testing.T, q *Queue, want ...mcreconcile.Request) {
	t.Helper()
	for _, w := range want {
		expectGet(t, q, w)
		q.Done(w)
	}
	expectEmpty(t, q)
}

func expectLen(t *testing.T, q *Queue, want int) {
	t.Helper()
	if got := q.Len(); got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
}

// waitForDeadline bounds every wait of these tests: a condition that never
// comes fails its test with what it waited for, instead of hanging until go
// test's timeout ends the whole package.
const waitForDeadline = 30 * time.Second

// waitFor polls cond until it holds, and fails t (from the test's goroutine)
// naming what when waitForDeadline passes first.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitForDeadline); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitForDeadline, what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// waitForTimer waits until the waiting loop armed a timer on the fake clock,
// so that a later Step fires it.
func waitForTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	waitFor(t, "the waiting loop to arm a timer", clk.HasWaiters)
}

// blockedInGet counts the goroutines of this process that wait in a Queue's
// Get (on its condition variable): a worker that has reached Get and found
// nothing it may take, not one that is about to call it.
func blockedInGet() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	blocked := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("sync.(*Cond).Wait")) && bytes.Contains(g, []byte("fairqueue.(*Queue).GetWithPriority(")) {
			blocked++
		}
	}
	return blocked
}

// waitForBlockedGets waits until n goroutines wait in Get (the tests of this
// package run one at a time, so they are the test's).
func waitForBlockedGets(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d goroutines blocked in Get", n), func() bool { return blockedInGet() == n })
}

// got is what a Get in the background returned.
type got struct {
	req      mcreconcile.Request
	shutdown bool
}

// getInBackground calls q.Get on a goroutine of its own and delivers what it
// returned; the test's goroutine checks it (t.Fatal may not be called from
// another goroutine).
func getInBackground(q *Queue) <-chan got {
	c := make(chan got, 1)
	go func() {
		r, shutdown := q.Get()
		c <- got{r, shutdown}
	}()
	return c
}

// receive waits for the background Get of c and returns its request; it
// fails t when the queue shut down instead or nothing came by the deadline.
func receive(t *testing.T, c <-chan got) mcreconcile.Request {
	t.Helper()
	select {
	case g := <-c:
		if g.shutdown {
			t.Fatal("Get reported shutdown")
		}
		return g.req
	case <-time.After(waitForDeadline):
		t.Fatalf("a Get still waits after %s", waitForDeadline)
	}
	return mcreconcile.Request{}
}

// expectStillBlocked fails t when the background Get of c has returned.
func expectStillBlocked(t *testing.T, c <-chan got, why string) {
	t.Helper()
	select {
	case g := <-c:
		t.Fatalf("Get returned %v (shutdown %v) %s", g.req, g.shutdown, why)
	default:
	}
}

// step moves the fake clock by d once the waiting loop armed a timer, and waits
// until the loop has moved every due request out of the waiting heap. It wakes
// the loop meanwhile: a loop that read the time just before the step arms its
// timer relative to the stepped clock and would otherwise sleep past the due time.
func step(t *testing.T, q *Queue, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	waitForTimer(t, clk)
	clk.Step(d)
	now := clk.Now()
	waitFor(t, "the due requests to leave the waiting heap", func() bool {
		q.wakeWaitingLoop()
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiting) == 0 || q.waiting[0].readyAt.After(now)
	})
}

// expectEmpty checks the queue holds no request and no member.
func expectEmpty(t *testing.T, q *Queue) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.entries) != 0 || len(q.members) != 0 || len(q.waiting) != 0 || q.ready != 0 || q.processing != 0 || q.next != nil {
		t.Fatalf("queue not empty: %d entries, %d members, %d waiting, %d ready, %d processing, ring %v",
			len(q.entries), len(q.members), len(q.waiting), q.ready, q.processing, q.next != nil)
	}
}

func TestNewMatchesNewQueueOption(t *testing.T) {
	var newQueue func(string, workqueue.TypedRateLimiter[mcreconcile.Request]) workqueue.TypedRateLimitingInterface[mcreconcile.Request] = New
	q := newQueue("widget", nil)
	defer q.ShutDown()
	if _, ok := q.(priorityqueue.PriorityQueue[mcreconcile.Request]); !ok {
		t.Fatalf("New returned %T, which controller-runtime would wrap instead of using as a priority queue", q)
	}
}

func TestDeduplicatesQueuedRequests(t *testing.T) {
	q, _ := newTestQueue(t)
	a, b := req("a", "x"), req("a", "y")
	q.Add(a)
	q.Add(b)
	q.Add(a)
	q.AddWithOpts(priorityqueue.AddOpts{}, a, a)
	expectLen(t, q, 2)
	expectGet(t, q, a)
	expectGet(t, q, b)
	expectLen(t, q, 0)
	q.Done(a)
	q.Done(b)
	expectEmpty(t, q)
}

func TestRequestBeingProcessedIsNotHandedOutTwice(t *testing.T) {
	q, _ := newTestQueue(t)
	a, b := req("a", "x"), req("b", "y")
	q.Add(a)
	expectGet(t, q, a)

	// Added twice while processed: not ready until Done, then once.
	q.Add(a)
	q.Add(a)
	expectLen(t, q, 0)
	q.Add(b)
	expectGet(t, q, b)
	q.Done(b)

	got := getInBackground(q)
	// The second worker has reached Get and waits there: it saw a queued
	// again while processed and did not take it.
	waitForBlockedGets(t, 1)
	expectStillBlocked(t, got, "while "+a.String()+" is being processed")
	q.Done(a)
	if r := receive(t, got); r != a {
		t.Fatalf("Get after Done = %v, want %v", r, a)
	}
	expectLen(t, q, 0)
	q.Done(a)
	expectEmpty(t, q)
}

func TestDoneWithoutGetIsIgnored(t *testing.T) {
	q, _ := newTestQueue(t)
	a := req("a", "x")
	q.Done(a)
	q.Add(a)
	q.Done(a) // queued, not being processed
	expectLen(t, q, 1)
	expectServed(t, q, a)
}

func TestAddRateLimitedBacksOffUntilForget(t *testing.T) {
	q, clk := newTestQueue(t)
	a := req("a", "x")

	// Backoff of the test's limiter: 1s, 2s, 4s...
	for i, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		q.AddRateLimited(a)
		if got := q.NumRequeues(a); got != i+1 {
			t.Fatalf("NumRequeues = %d, want %d", got, i+1)
		}
		step(t, q, clk, delay-time.Millisecond)
		expectLen(t, q, 0)
		step(t, q, clk, time.Millisecond)
		expectLen(t, q, 1)
		expectGet(t, q, a)
		q.Done(a)
	}

	q.Forget(a)
	if got := q.NumRequeues(a); got != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", got)
	}
	q.AddRateLimited(a)
	step(t, q, clk, time.Second)
	expectServed(t, q, a)
}

func TestAddAfter(t *testing.T) {
	a, b := req("a", "x"), req("a", "y")
	tests := []struct {
		name string
		// run adds and steps the clock; it returns the requests Get must hand out.
		run func(q *Queue, clk *clocktesting.FakeClock) []mcreconcile.Request
	}{{
		name: "delays",
		run: func(q *Queue, clk *clocktesting.FakeClock) []mcreconcile.Request {
			q.AddAfter(a, 10*time.Second)
			step(t, q, clk, 9*time.Second)
			if q.Len() != 0 {
				return nil
			}
			step(t, q, clk, time.Second)
			return []mcreconcile.Request{a}
		},
	}, {
		name: "zero delay adds at once",
		run: func(q *Queue, _ *clocktesting.FakeClock) []mcreconcile.Request {
			q.AddAfter(a, 0)
			q.AddAfter(b, -time.Second)
			return []mcreconcile.Request{a, b}
		},
	}, {
		name: "earliest delay wins",
		run: func(q *Queue, clk *clocktesting.FakeClock) []mcreconcile.Request {
			q.AddAfter(a, 10*time.Second)
			q.AddAfter(a, 5*time.Second)
			q.AddAfter(a, 7*time.Second)
			step(t, q, clk, 5*time.Second)
			return []mcreconcile.Request{a}
		},
	}, {
		name: "ready request stays ready",
		run: func(q *Queue, _ *clocktesting.FakeClock) []mcreconcile.Request {
			q.Add(a)
			q.AddAfter(a, time.Hour)
			return []mcreconcile.Request{a}
		},
	}, {
		name: "add makes a waiting request ready once",
		run: func(q *Queue, _ *clocktesting.FakeClock) []mcreconcile.Request {
			q.AddAfter(a, time.Hour)
			q.Add(a)
			return []mcreconcile.Request{a}
		},
	}, {
		name: "delays are ordered",
		run: func(q *Queue, clk *clocktesting.FakeClock) []mcreconcile.Request {
			q.AddAfter(a, 2*time.Second)
			q.AddAfter(b, time.Second)
			step(t, q, clk, 2*time.Second)
			return []mcreconcile.Request{b, a}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, clk := newTestQueue(t)
			want := tt.run(q, clk)
			expectLen(t, q, len(want))
			expectServed(t, q, want...)
		})
	}
}

func TestAddAfterWhileProcessingWaitsForDone(t *testing.T) {
	q, clk := newTestQueue(t)
	a := req("a", "x")
	q.Add(a)
	expectGet(t, q, a)
	q.AddAfter(a, time.Second)
	step(t, q, clk, time.Second)
	expectLen(t, q, 0) // due, but still being processed
	q.Done(a)
	expectLen(t, q, 1)
	expectServed(t, q, a)
}

func TestShutDownReleasesBlockedGet(t *testing.T) {
	q, _ := newTestQueue(t)
	got := getInBackground(q)
	waitForBlockedGets(t, 1)
	q.ShutDown()
	select {
	case g := <-got:
		if !g.shutdown {
			t.Fatalf("blocked Get returned %v instead of shutdown", g.req)
		}
	case <-time.After(waitForDeadline):
		t.Fatalf("a Get blocked before ShutDown still waits after %s", waitForDeadline)
	}
}

func TestShutDown(t *testing.T) {
	q, _ := newTestQueue(t)
	a, b, c := req("a", "x"), req("a", "y"), req("c", "z")
	q.Add(a)
	q.AddAfter(b, time.Hour)
	expectGet(t, q, a)
	q.Add(b)
	if q.ShuttingDown() {
		t.Fatal("ShuttingDown before ShutDown")
	}

	q.ShutDown()
	if !q.ShuttingDown() {
		t.Fatal("not ShuttingDown after ShutDown")
	}
	if r, shutdown := q.Get(); !shutdown {
		t.Fatalf("Get handed out %v after ShutDown", r)
	}
	q.Add(c)
	q.AddAfter(c, time.Second)
	q.AddRateLimited(c)
	q.mu.Lock()
	_, added := q.entries[c]
	q.mu.Unlock()
	if added {
		t.Fatal("Add after ShutDown queued a request")
	}
	q.Done(a) // a worker finishing after shutdown
	q.ShutDown()
	q.ShutDownWithDrain() // returns at once after ShutDown
}

func TestShutDownWithDrain(t *testing.T) {
	q, _ := newTestQueue(t)
	a, b, c := req("a", "x"), req("b", "y"), req("c", "z")
	q.Add(a)
	q.Add(b)
	expectGet(t, q, a)
	q.Add(a) // processed again after Done
	q.AddAfter(c, time.Hour)

	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	waitFor(t, "ShutDownWithDrain to begin", q.ShuttingDown)
	q.Add(c)
	expectGet(t, q, b)
	q.Done(b)
	q.Done(a)
	expectGet(t, q, a)
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while a request was being processed")
	default:
	}
	q.Done(a)
	waitFor(t, "ShutDownWithDrain to return", func() bool {
		select {
		case <-drained:
			return true
		default:
			return false
		}
	})
	if r, shutdown := q.Get(); !shutdown {
		t.Fatalf("Get handed out %v after the drain", r)
	}
	expectEmpty(t, q)
}

func TestShutDownEndsDrain(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add(req("a", "x"))
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	waitFor(t, "ShutDownWithDrain to begin", q.ShuttingDown)
	q.ShutDown()
	waitFor(t, "ShutDownWithDrain to return after ShutDown", func() bool {
		select {
		case <-drained:
			return true
		default:
			return false
		}
	})
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("Get handed out a request after ShutDown")
	}
}
