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
// requests in flight.
func TestConcurrentProducersAndWorkers(t *testing.T) {
	for _, bound := range []int{0, 1, 2} {
		t.Run(fmt.Sprint("MaxInFlightPerMember=", bound), func(t *testing.T) { testConcurrentProducersAndWorkers(t, bound) })
	}
}

func testConcurrentProducersAndWorkers(t *testing.T, bound int) {
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
	})
	defer q.ShutDown()

	var (
		seq      atomic.Int64
		mu       sync.Mutex
		lastAdd  = map[mcreconcile.Request]int64{}
		lastGet  = map[mcreconcile.Request]int64{}
		inFlight = map[mcreconcile.Request]bool{}
		overlaps []mcreconcile.Request
		// ofMember counts each member's requests in flight; mostInFlight is its maximum.
		ofMember     = map[string]int{}
		mostInFlight int
		gets         atomic.Int64
	)
	recordAdd := func(r mcreconcile.Request) {
		mu.Lock()
		lastAdd[r] = seq.Add(1)
		mu.Unlock()
	}

	var producing sync.WaitGroup
	for p := range producers {
		producing.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			for range adds {
				r := req(fmt.Sprint("c", rng.IntN(clusters)), fmt.Sprint("n", rng.IntN(names)))
				recordAdd(r)
				switch rng.IntN(4) {
				case 0:
					q.AddAfter(r, time.Duration(rng.IntN(1000))*time.Microsecond)
				case 1:
					q.AddRateLimited(r)
				default:
					q.Add(r)
				}
			}
		})
	}

	var working sync.WaitGroup
	for w := range workers {
		working.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for {
				r, shutdown := q.Get()
				if shutdown {
					return
				}
				gets.Add(1)
				mu.Lock()
				if inFlight[r] {
					overlaps = append(overlaps, r)
				}
				inFlight[r] = true
				ofMember[string(r.ClusterName)]++
				mostInFlight = max(mostInFlight, ofMember[string(r.ClusterName)])
				lastGet[r] = seq.Add(1)
				mu.Unlock()

				if rng.IntN(4) == 0 {
					recordAdd(r)
					q.Add(r) // changed again while being reconciled
				}
				if rng.IntN(2) == 0 {
					q.Forget(r)
				}

				mu.Lock()
				inFlight[r] = false
				ofMember[string(r.ClusterName)]--
				mu.Unlock()
				q.Done(r)
			}
		})
	}

	producing.Wait()
	waitFor(func() bool { // every request processed, none delayed
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.entries) == 0
	})
	q.ShutDown()
	working.Wait()

	if len(overlaps) > 0 {
		t.Fatalf("requests handed out to two workers at once: %v", overlaps)
	}
	for r, added := range lastAdd {
		if lastGet[r] < added {
			t.Errorf("%v was added (at %d) but not handed out afterwards (last at %d)", r, added, lastGet[r])
		}
	}
	if bound > 0 && mostInFlight > bound {
		t.Errorf("a member had %d requests in flight, bound %d", mostInFlight, bound)
	}
	if g, a := gets.Load(), seq.Load()-gets.Load(); g > a {
		t.Errorf("%d requests handed out for %d adds", g, a)
	}
	expectEmpty(t, q)
}
