package fairqueue

import (
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

// waitFor polls cond until it holds; the test's own timeout bounds it.
func waitFor(cond func() bool) {
	for !cond() {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// waitForTimer waits until the waiting loop armed a timer on the fake clock,
// so that a later Step fires it.
func waitForTimer(clk *clocktesting.FakeClock) {
	waitFor(clk.HasWaiters)
}

// step moves the fake clock by d once the waiting loop armed a timer, and waits
// until the loop has moved every due request out of the waiting heap. It wakes
// the loop meanwhile: a loop that read the time just before the step arms its
// timer relative to the stepped clock and would otherwise sleep past the due time.
func step(q *Queue, clk *clocktesting.FakeClock, d time.Duration) {
	waitForTimer(clk)
	clk.Step(d)
	now := clk.Now()
	waitFor(func() bool {
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

	got := make(chan mcreconcile.Request)
	go func() {
		r, _ := q.Get()
		got <- r
	}()
	waitFor(func() bool { // the second worker is blocked in Get
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.ready == 0 && q.processing == 1
	})
	select {
	case r := <-got:
		t.Fatalf("Get handed out %v while %v is being processed", r, a)
	default:
	}
	q.Done(a)
	if r := <-got; r != a {
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
		step(q, clk, delay-time.Millisecond)
		expectLen(t, q, 0)
		step(q, clk, time.Millisecond)
		expectLen(t, q, 1)
		expectGet(t, q, a)
		q.Done(a)
	}

	q.Forget(a)
	if got := q.NumRequeues(a); got != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", got)
	}
	q.AddRateLimited(a)
	step(q, clk, time.Second)
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
			step(q, clk, 9*time.Second)
			if q.Len() != 0 {
				return nil
			}
			step(q, clk, time.Second)
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
			step(q, clk, 5*time.Second)
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
			step(q, clk, 2*time.Second)
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
	step(q, clk, time.Second)
	expectLen(t, q, 0) // due, but still being processed
	q.Done(a)
	expectLen(t, q, 1)
	expectServed(t, q, a)
}

func TestShutDownReleasesBlockedGet(t *testing.T) {
	q, _ := newTestQueue(t)
	shutdown := make(chan bool)
	go func() {
		_, s := q.Get()
		shutdown <- s
	}()
	q.ShutDown()
	if !<-shutdown {
		t.Fatal("blocked Get returned a request instead of shutdown")
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
	waitFor(q.ShuttingDown)
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
	<-drained
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
	waitFor(q.ShuttingDown)
	q.ShutDown()
	<-drained
	if _, shutdown := q.Get(); !shutdown {
		t.Fatal("Get handed out a request after ShutDown")
	}
}
