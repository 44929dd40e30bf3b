package fairqueue

import (
	"fmt"
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

// BenchmarkAddGetDone measures one request's way through the queue, with the
// queue otherwise empty and with a backlog, next to client-go's queue and
// controller-runtime's priority queue.
func BenchmarkAddGetDone(b *testing.B) {
	queues := []struct {
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
	for _, backlog := range []int{0, 10_000} {
		for _, qt := range queues {
			b.Run(fmt.Sprintf("%s/backlog=%d", qt.name, backlog), func(b *testing.B) {
				q := qt.new()
				defer q.ShutDown()
				for _, r := range benchRequests(100, backlog) {
					q.Add(r)
				}
				reqs := benchRequests(16, 4096)
				for i := range reqs {
					reqs[i].Namespace = "bench"
				}
				b.ReportAllocs()
				b.ResetTimer()
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

// BenchmarkAddGetDoneParallel measures the queue under contention: every
// goroutine adds a request, takes one and finishes it.
func BenchmarkAddGetDoneParallel(b *testing.B) {
	q := New("bench", nil)
	defer q.ShutDown()
	reqs := benchRequests(16, 4096)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			q.Add(reqs[i%len(reqs)])
			r, _ := q.Get()
			q.Done(r)
			i++
		}
	})
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
