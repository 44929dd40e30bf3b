package fairqueue

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// benchRequests returns n requests spread over clusters members.
func benchRequests(clusters, n int) []mcreconcile.Request {
	reqs := make([]mcreconcile.Request, n)
	for i := range reqs {
		reqs[i] = req(fmt.Sprint("member-", i%clusters), fmt.Sprint("widget-", i))
	}
	return reqs
}

// benchQueues are the queues the benchmarks compare: the shared fair queue
// (unbounded and with the manager's bounds), client-go's rate-limiting queue
// and controller-runtime's priority queue.
var benchQueues = []struct {
	name string
	new  func() workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}{
	{"fairqueue", func() workqueue.TypedRateLimitingInterface[mcreconcile.Request] { return New("bench", nil) }},
	{"fairqueue-bounded", func() workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
		return NewWithOptions(Options{Name: "bench", MaxInFlightPerMember: 24, Workers: 32})
	}},
	{"client-go", func() workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
		return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	}},
	{"priorityqueue", func() workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
		return priorityqueue.New[mcreconcile.Request]("bench")
	}},
}

// BenchmarkAddGetDone measures one request's way through each queue, its
// requests spread over 1, 10 and 100 members, with the queue otherwise empty
// and with a backlog of 10,000 requests.
func BenchmarkAddGetDone(b *testing.B) {
	for _, members := range []int{1, 10, 100} {
		for _, backlog := range []int{0, 10_000} {
			for _, qt := range benchQueues {
				b.Run(fmt.Sprintf("members=%d/backlog=%d/%s", members, backlog, qt.name), func(b *testing.B) {
					q := qt.new()
					defer q.ShutDown()
					for _, r := range benchRequests(members, backlog) {
						q.Add(r)
					}
					reqs := benchRequests(members, 4096)
					for i := range reqs {
						reqs[i].Namespace = "bench"
					}
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						q.Add(reqs[i%len(reqs)])
						r, _ := q.Get()
						q.Done(r)
						if backlog > 0 { // keep the backlog's size
							q.Add(r)
						}
					}
				})
			}
		}
	}
}

// BenchmarkAddGetDoneParallel measures each queue under contention: every
// goroutine adds a request of its own, takes one and finishes it. Each
// goroutine's requests are its own, so that no two adds coalesce and every
// Get has a request to take, whatever the iteration count.
func BenchmarkAddGetDoneParallel(b *testing.B) {
	for _, members := range []int{1, 10, 100} {
		for _, qt := range benchQueues {
			b.Run(fmt.Sprintf("members=%d/%s", members, qt.name), func(b *testing.B) {
				q := qt.new()
				defer q.ShutDown()
				var goroutines atomic.Int64
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					reqs := benchRequests(members, 64)
					g := fmt.Sprint("g", goroutines.Add(1))
					for i := range reqs {
						reqs[i].Namespace = g
					}
					for i := 0; pb.Next(); i++ {
						q.Add(reqs[i%len(reqs)])
						r, _ := q.Get()
						q.Done(r)
					}
				})
			})
		}
	}
}

// BenchmarkAddRateLimited measures rate-limited adds whose backoff has passed at once.
func BenchmarkAddRateLimited(b *testing.B) {
	q := NewWithOptions(Options{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](time.Nanosecond, time.Nanosecond)})
	defer q.ShutDown()
	reqs := benchRequests(16, 4096)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.AddRateLimited(reqs[i%len(reqs)])
		r, _ := q.Get()
		q.Done(r)
		q.Forget(r)
	}
}
