package fairqueue

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// TestConcurrentProducersAndWorkers checks, under the race detector, that no two
// workers ever hold the same request and that every add is followed by a Get of
// its request, whatever the mix of Add, AddAfter, AddRateLimited and adds during
// processing; and, with MaxInFlightPerMember, that no member ever has more
// requests in flight; with Workers too, that the bound on unresponsive members
// never leaves a Get waiting for good.
func TestConcurrentProducersAndWorkers(t *testing.T) {
	for _, c := range []struct{ bound, workers int }{{0, 0}, {1, 0}, {2, 0}, {2, 4}, {0, 4}} {
		t.Run(fmt.Sprintf("MaxInFlightPerMember=%d,Workers=%d", c.bound, c.workers), func(t *testing.T) {
			testConcurrentProducersAndWorkers(t, c.bound, c.workers)
		})
	}
}

func testConcurrentProducersAndWorkers(t *testing.T, bound, poolSize int) {
	const (
		producers = 4
		workers   = 4
		adds      = 2000
		clusters  = 8
		names     = 50
	)
	q := NewWithOptions(Options{
		Name:                 t.Name(),
		RateLimiter:          workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](time.Microsecond, time.Millisecond),
		MaxInFlightPerMember: bound,
		Workers:              poolSize,
	})
	defer q.ShutDown()
	j := newJournal()

	var producing sync.WaitGroup
	for p := range producers {
		producing.Go(func() { produce(q, j, uint64(p), adds, clusters, names) })
	}
	var working sync.WaitGroup
	for w := range workers {
		working.Go(func() { work(q, j, uint64(w)) })
	}

	producing.Wait()
	waitFor(t, "every request processed, none delayed", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.entries) == 0
	})
	q.ShutDown()
	working.Wait()

	j.check(t, bound)
	expectEmpty(t, q)
}

// journal records, in one sequence, the adds of producers and the requests
// workers hold.
type journal struct {
	seq  atomic.Int64
	gets atomic.Int64

	mu       sync.Mutex
	lastAdd  map[mcreconcile.Request]int64
	lastGet  map[mcreconcile.Request]int64
	inFlight map[mcreconcile.Request]bool
	overlaps []mcreconcile.Request
	// ofMember counts each member's requests in flight; mostInFlight is its maximum.
	ofMember     map[string]int
	mostInFlight int
}

func newJournal() *journal {
	return &journal{
		lastAdd:  map[mcreconcile.Request]int64{},
		lastGet:  map[mcreconcile.Request]int64{},
		inFlight: map[mcreconcile.Request]bool{},
		ofMember: map[string]int{},
	}
}

// added records that r is about to be added.
func (j *journal) added(r mcreconcile.Request) {
	j.mu.Lock()
	j.lastAdd[r] = j.seq.Add(1)
	j.mu.Unlock()
}

// handedOut records that a worker got r.
func (j *journal) handedOut(r mcreconcile.Request) {
	j.gets.Add(1)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.inFlight[r] {
		j.overlaps = append(j.overlaps, r)
	}
	j.inFlight[r] = true
	j.ofMember[string(r.ClusterName)]++
	j.mostInFlight = max(j.mostInFlight, j.ofMember[string(r.ClusterName)])
	j.lastGet[r] = j.seq.Add(1)
}

// finished records that the worker holding r is about to call Done.
func (j *journal) finished(r mcreconcile.Request) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.inFlight[r] = false
	j.ofMember[string(r.ClusterName)]--
}

// produce adds adds requests, spread over clusters members and names
// objects, to q, with a random mix of Add, AddAfter and AddRateLimited.
func produce(q *Queue, j *journal, seed uint64, adds, clusters, names int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for range adds {
		r := req(fmt.Sprint("c", rng.IntN(clusters)), fmt.Sprint("n", rng.IntN(names)))
		j.added(r)
		switch rng.IntN(4) {
		case 0:
			q.AddAfter(r, time.Duration(rng.IntN(1000))*time.Microsecond)
		case 1:
			q.AddRateLimited(r)
		default:
			q.Add(r)
		}
	}
}

// work processes requests of q until it shuts down, adding some of them again
// while it holds them and forgetting some.
func work(q *Queue, j *journal, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	for {
		r, shutdown := q.Get()
		if shutdown {
			return
		}
		j.handedOut(r)
		if rng.IntN(4) == 0 {
			j.added(r)
			q.Add(r) // changed again while being reconciled
		}
		if rng.IntN(2) == 0 {
			q.Forget(r)
		}
		j.finished(r)
		q.Done(r)
	}
}

// check fails t when two workers held a request at once, when a request was
// not handed out after its last add, when a member held more than bound
// requests (bound > 0), or when there were more gets than adds.
func (j *journal) check(t *testing.T, bound int) {
	t.Helper()
	if len(j.overlaps) > 0 {
		t.Fatalf("requests handed out to two workers at once: %v", j.overlaps)
	}
	for r, added := range j.lastAdd {
		if j.lastGet[r] < added {
			t.Errorf("%v was added (at %d) but not handed out afterwards (last at %d)", r, added, j.lastGet[r])
		}
	}
	if bound > 0 && j.mostInFlight > bound {
		t.Errorf("a member had %d requests in flight, bound %d", j.mostInFlight, bound)
	}
	if g, a := j.gets.Load(), j.seq.Load()-j.gets.Load(); g > a {
		t.Errorf("%d requests handed out for %d adds", g, a)
	}
}
