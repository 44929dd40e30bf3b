package members

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/reconcilers/controller"
	"github.com/widgethub/widgethub/reconcilers/controller/fairqueue"
)

// registrationWorkers builds the queue of a source's controller and runs
// each reconcile under the context that queue may cancel (see "Workers" in
// the package documentation).
type registrationWorkers struct {
	workers int
	queue   atomic.Pointer[fairqueue.Queue]
}

// registrationsInFlightBound is how many workers the registrations that were
// last cut short, or held a worker fairqueue.DefaultStallAfter or more, may
// hold between them (fairqueue.UnresponsiveBound with this as the bound of
// one member): half of them. A registration is one key, so it never has more
// than one reconcile in flight whatever the bound of one member is.
func registrationsInFlightBound(workers int) int {
	return max(1, workers/2)
}

// registrationReclaimAfter is how long every worker may stay busy, none
// coming free, while a registration waits with nothing in flight before the
// reconcile held longest is cut short (fairqueue.Options.ReclaimAfter). A
// healthy member's engagement (its checks, a fence, its cache's first list)
// takes a few hundred milliseconds on a loaded machine, more than the
// Widget queue's 100ms: when many registrations become ready at once (a
// dead replica's members, a restart), a shorter wait would cut the healthy
// engagements handed out first, which are then among the longest held, and
// each one cut counts as hanging until it answers again.
const registrationReclaimAfter = time.Second

// newQueue is the controller's NewQueue: the shared fair queue with each
// registration as its own member.
func (w *registrationWorkers) newQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	q := fairqueue.NewWithOptions(fairqueue.Options{
		Name:                 name,
		RateLimiter:          keyedLimiter{rl},
		MaxInFlightPerMember: registrationsInFlightBound(w.workers),
		Workers:              w.workers,
		ReclaimAfter:         registrationReclaimAfter,
		// A registration is one key: its engagement in flight counts as
		// hanging once it stalls, not while it is merely being served, so
		// that one cut short is retried while the others engage.
		OneKeyPerMember: true,
		MetricsProvider: controller.QueueMetricsProvider(),
	})
	w.queue.Store(q)
	return registrationQueue{q}
}

// add queues req, once the controller has its queue.
func (w *registrationWorkers) add(req reconcile.Request) {
	if q := w.queue.Load(); q != nil {
		q.Add(key(req))
	}
}

// context returns the context to run req's member calls with: ctx, which
// the queue cancels with cause fairqueue.ErrWorkerReclaimed to take the
// worker back for a registration that waits with none.
func (w *registrationWorkers) context(ctx context.Context, req reconcile.Request) (context.Context, context.CancelFunc) {
	q := w.queue.Load()
	if q == nil {
		return context.WithCancel(ctx)
	}
	return q.Context(ctx, key(req))
}

// errRegistrationGone is the cause of a member context cut short because its
// registration was deleted, being deleted or no longer a registration.
var errRegistrationGone = errors.New("the registration is gone")

// cutGone is an event handler of the source's objects that cuts short the
// reconcile in flight of a registration that goes: its engagement may be
// hanging in a member's checks or cache sync, and would hold a worker until
// reclaimed or until the sync timeout, for a member no longer wanted. The
// controller's own handler of the same event queues the registration again,
// and the next reconcile lets its member go.
func (w *registrationWorkers) cutGone() handler.TypedEventHandler[client.Object, reconcile.Request] {
	cut := func(obj client.Object) {
		if q := w.queue.Load(); q != nil {
			q.Cancel(key(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}), errRegistrationGone)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectNew.GetDeletionTimestamp() != nil {
				cut(e.ObjectNew)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			cut(e.Object)
		},
	}
}

// reclaimed makes a reconcile whose member context was cut short to give
// its worker back fail with fairqueue.ErrWorkerReclaimed, whatever it
// returned, so that it is retried with backoff. One cut short because its
// registration went ends without an error: the event that cut it queued
// the registration again.
func reclaimed(memberCtx context.Context, result reconcile.Result, err error) (reconcile.Result, error) {
	cause := context.Cause(memberCtx)
	if errors.Is(cause, errRegistrationGone) {
		return reconcile.Result{}, nil
	}
	if !errors.Is(cause, fairqueue.ErrWorkerReclaimed) || errors.Is(err, fairqueue.ErrWorkerReclaimed) {
		return result, err
	}
	if err == nil {
		return reconcile.Result{}, cause
	}
	return reconcile.Result{}, fmt.Errorf("%w: %w", cause, err)
}

// key is req as a request of the fair queue: its registration is its member.
func key(req reconcile.Request) mcreconcile.Request {
	return mcreconcile.Request{Request: req, ClusterName: multicluster.ClusterName(req.String())}
}

// registrationQueue is a fair queue of registration requests.
type registrationQueue struct{ q *fairqueue.Queue }

var _ workqueue.TypedRateLimitingInterface[reconcile.Request] = registrationQueue{}

func (r registrationQueue) Add(req reconcile.Request) { r.q.Add(key(req)) }
func (r registrationQueue) AddAfter(req reconcile.Request, d time.Duration) {
	r.q.AddAfter(key(req), d)
}
func (r registrationQueue) AddRateLimited(req reconcile.Request) { r.q.AddRateLimited(key(req)) }
func (r registrationQueue) Forget(req reconcile.Request)         { r.q.Forget(key(req)) }
func (r registrationQueue) NumRequeues(req reconcile.Request) int {
	return r.q.NumRequeues(key(req))
}
func (r registrationQueue) Done(req reconcile.Request) { r.q.Done(key(req)) }
func (r registrationQueue) Get() (reconcile.Request, bool) {
	req, shutdown := r.q.Get()
	return req.Request, shutdown
}
func (r registrationQueue) Len() int           { return r.q.Len() }
func (r registrationQueue) ShutDown()          { r.q.ShutDown() }
func (r registrationQueue) ShutDownWithDrain() { r.q.ShutDownWithDrain() }
func (r registrationQueue) ShuttingDown() bool { return r.q.ShuttingDown() }

// keyedLimiter is a rate limiter of registration requests used for the
// fair queue's keys.
type keyedLimiter struct {
	rl workqueue.TypedRateLimiter[reconcile.Request]
}

func (k keyedLimiter) When(req mcreconcile.Request) time.Duration { return k.rl.When(req.Request) }
func (k keyedLimiter) Forget(req mcreconcile.Request)             { k.rl.Forget(req.Request) }
func (k keyedLimiter) NumRequeues(req mcreconcile.Request) int {
	return k.rl.NumRequeues(req.Request)
}
