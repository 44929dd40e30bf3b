package fairqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// recorder is a reconciler that records the requests it is called with, fails
// "retry" once and asks to requeue "after" once.
type recorder struct {
	queue func() *Queue

	mu       sync.Mutex
	order    []mcreconcile.Request
	requeues map[mcreconcile.Request][]int // NumRequeues seen at each call
	want     int
	done     chan struct{}
}

func (r *recorder) Reconcile(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = append(r.order, req)
	r.requeues[req] = append(r.requeues[req], r.queue().NumRequeues(req))
	if len(r.order) == r.want {
		close(r.done)
	}
	first := len(r.requeues[req]) == 1
	switch {
	case req.Name == "retry" && first:
		return reconcile.Result{}, errors.New("transient")
	case req.Name == "after" && first:
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	}
	return reconcile.Result{}, nil
}

func TestControllerUsesTheQueue(t *testing.T) {
	const flood = 200
	qs := &queues{}
	rec := &recorder{
		queue:    qs.builtQueue,
		requeues: map[mcreconcile.Request][]int{},
		want:     flood + 1 + 2 + 2,
		done:     make(chan struct{}),
	}
	c, err := controller.NewTypedUnmanaged("fairqueue-test", controller.TypedOptions[mcreconcile.Request]{
		Reconciler:         rec,
		SkipNameValidation: new(true),
		NewQueue:           qs.newQueue,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The source queues a flood of member a before one request of member b;
	// the controller starts its worker after its sources started.
	err = c.Watch(source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		qs.mu.Lock()
		qs.started = q
		qs.mu.Unlock()
		for i := range flood {
			q.Add(req("a", fmt.Sprint(i)))
		}
		q.Add(req("b", "live"))
		q.Add(req("c", "retry"))
		q.Add(req("c", "after"))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, c, rec.done)

	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.built == nil || qs.started != workqueue.TypedRateLimitingInterface[mcreconcile.Request](qs.built) {
		t.Fatalf("the controller gave its sources %T, not the fair queue it built (%p)", qs.started, qs.built)
	}
	rec.check(t, qs.built, flood)
	if !qs.built.ShuttingDown() {
		t.Error("the controller did not shut the queue down")
	}
}

// queues holds the queue a controller built with New and the queue it gave
// its sources.
type queues struct {
	mu      sync.Mutex
	built   *Queue
	started workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}

// newQueue is New, as the controller's NewQueue option, recording the queue.
func (qs *queues) newQueue(name string, rl workqueue.TypedRateLimiter[mcreconcile.Request]) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	q := New(name, rl)
	qs.mu.Lock()
	qs.built = q.(*Queue)
	qs.mu.Unlock()
	return q
}

func (qs *queues) builtQueue() *Queue {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.built
}

// runUntil runs c until done is closed, then stops it.
func runUntil(t *testing.T, c controller.TypedController[mcreconcile.Request], done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error)
	go func() { stopped <- c.Start(ctx) }()
	<-done
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("controller: %v", err)
	}
}

// check checks the reconciles r saw through q: member b's request before
// most of member a's flood, a failed reconcile requeued with backoff and
// forgotten once it succeeded, and RequeueAfter honoured without counting as
// a failure.
func (r *recorder) check(t *testing.T, q *Queue, flood int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.order, req("b", "live")); i < 0 || i > 1 {
		t.Errorf("member b's request reconciled at position %d behind member a's flood of %d, want 0 or 1", i, flood)
	}
	// A failed reconcile is requeued with backoff, a success forgets it.
	if got, want := r.requeues[req("c", "retry")], []int{0, 1}; !slices.Equal(got, want) {
		t.Errorf("NumRequeues of retry at each reconcile = %v, want %v", got, want)
	}
	if got := q.NumRequeues(req("c", "retry")); got != 0 {
		t.Errorf("NumRequeues of retry after success = %d, want 0", got)
	}
	// RequeueAfter is honoured without counting as a failure.
	if got, want := r.requeues[req("c", "after")], []int{0, 0}; !slices.Equal(got, want) {
		t.Errorf("NumRequeues of after at each reconcile = %v, want %v", got, want)
	}
}
