package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	mcsource "sigs.k8s.io/multicluster-runtime/pkg/source"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/reconcilers/controller/fairqueue"
)

// Controller reconciles requests from every engaged member through one queue.
type Controller struct {
	crcontroller.TypedController[mcreconcile.Request]

	name    string
	sources []mcsource.Source

	mu      sync.Mutex
	engaged map[multicluster.ClusterName]*engagement
	// queue is the fair queue, once the controller has started.
	queue *fairqueue.Queue
}

type engagement struct {
	cluster cluster.Cluster
	ctx     context.Context
	cancel  context.CancelFunc
}

var _ mcmanager.Runnable = (*Controller)(nil)

// Options configure a Controller.
type Options struct {
	// Reconciler is called with the requests of every member.
	Reconciler reconcile.TypedReconciler[mcreconcile.Request]
	// MaxConcurrentReconciles is the number of workers, shared by all members.
	MaxConcurrentReconciles int
	// MaxConcurrentReconcilesPerMember is how many of them one member may hold
	// at once; zero means three quarters of MaxConcurrentReconciles. The
	// members that do not answer hold no more than that between them either
	// (fairqueue.UnresponsiveBound).
	MaxConcurrentReconcilesPerMember int
	// ReconcileTimeout is the deadline of each Reconcile call; zero means
	// DefaultReconcileTimeout, negative none.
	ReconcileTimeout time.Duration
	// LogConstructor returns the logger of a request; nil: the manager's,
	// with the controller's name and the request's cluster, namespace and
	// name (requestLogger).
	LogConstructor func(*mcreconcile.Request) logr.Logger
	// Outcomes, when set, is told how each reconcile ended.
	Outcomes OutcomeRecorder
}

// OutcomeRecorder is told how each reconcile of a member's object ended: the
// engine that engages the members judges their health from it (a member
// whose writes mostly fail is Degraded). It must not block.
type OutcomeRecorder interface {
	RecordOutcome(cluster multicluster.ClusterName, key types.NamespacedName, err error)
}

// DefaultReconcileTimeout bounds one Reconcile call. A Widget reconcile is
// two reads from the cache and at most two writes, each bounded by the
// member request deadline (connect.DefaultRequestTimeout, 30s): a minute
// lets both writes use theirs, and frees the worker of any reconcile that
// waits on something without a deadline of its own.
const DefaultReconcileTimeout = time.Minute

// PerMember is how many of total workers one member may hold: perMember when
// set, else three quarters of total (at least one).
func PerMember(total, perMember int) int {
	if perMember > 0 {
		return perMember
	}
	return max(1, total*3/4)
}

// New builds a controller named name whose sources are started on each member
// the manager engages, and adds it to mgr. Its queue is the shared fair queue
// (package fairqueue) with each member bounded as opts say, and reports its
// measurements as widgethub_workqueue_* metrics.
func New(name string, mgr mcmanager.Manager, opts Options, sources ...mcsource.Source) (*Controller, error) {
	c := &Controller{
		name:    name,
		sources: sources,
		engaged: map[multicluster.ClusterName]*engagement{},
	}
	if opts.LogConstructor == nil {
		opts.LogConstructor = requestLogger(mgr.GetLogger().WithValues("controller", name))
	}
	inner, err := newUnmanaged(name, opts, c.setQueue)
	if err != nil {
		return nil, err
	}
	c.TypedController = inner
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("add controller %q: %w", name, err)
	}
	return c, nil
}

// requestLogger is the log constructor that names each request's cluster,
// namespace and name on every line, printable: a hostile member may answer
// with any name.
func requestLogger(base logr.Logger) func(*mcreconcile.Request) logr.Logger {
	return func(req *mcreconcile.Request) logr.Logger {
		if req == nil {
			return base
		}
		return base.WithValues("cluster", req.ClusterName, "namespace", v1alpha1.Printable(req.Namespace, v1alpha1.MaxNameLength),
			"name", v1alpha1.Printable(req.Name, v1alpha1.MaxNameLength))
	}
}

// newUnmanaged builds the controller-runtime controller that New wraps: its
// workers, reconcile deadline and fair queue as opts say, each reconcile
// under a context the queue may cancel to reclaim its worker (reclaimable),
// and retries within each member's budget (retry.go). built, when set, is
// given the queue when the controller builds it as it starts.
func newUnmanaged(name string, opts Options, built func(*fairqueue.Queue)) (crcontroller.TypedController[mcreconcile.Request], error) {
	workers := max(1, opts.MaxConcurrentReconciles)
	perMember := PerMember(workers, opts.MaxConcurrentReconcilesPerMember)
	timeout := opts.ReconcileTimeout
	switch {
	case timeout == 0:
		timeout = DefaultReconcileTimeout
	case timeout < 0:
		timeout = 0
	}
	var queue atomic.Pointer[fairqueue.Queue]
	return crcontroller.NewTypedUnmanaged(name, crcontroller.TypedOptions[mcreconcile.Request]{
		Reconciler:              recorded(reclaimable(opts.Reconciler, &queue), opts.Outcomes),
		MaxConcurrentReconciles: workers,
		ReconciliationTimeout:   timeout,
		RateLimiter:             retryRateLimiter(),
		LogConstructor:          opts.LogConstructor,
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[mcreconcile.Request]) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
			q := fairqueue.NewWithOptions(fairqueue.Options{
				Name: name, RateLimiter: rl, MetricsProvider: queueMetricsProvider{},
				MaxInFlightPerMember: perMember, Workers: workers,
			})
			queue.Store(q)
			if built != nil {
				built(q)
			}
			return q
		},
	})
}

// reclaimable runs rec under the context the queue gives each request
// (fairqueue.Queue.Context), which the queue cancels to take the worker back
// for a member that waits with none. A reconcile so cut short fails with
// fairqueue.ErrWorkerReclaimed, whatever it returned, so that it is retried
// like any failure, within its member's retry budget: nothing it was to do is
// lost, and a retry of work it finished anyway writes nothing.
func reclaimable(rec reconcile.TypedReconciler[mcreconcile.Request], queue *atomic.Pointer[fairqueue.Queue]) reconcile.TypedReconciler[mcreconcile.Request] {
	return reconcile.TypedFunc[mcreconcile.Request](func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		q := queue.Load()
		if q == nil {
			return rec.Reconcile(ctx, req)
		}
		ctx, release := q.Context(ctx, req)
		defer release()
		result, err := rec.Reconcile(ctx, req)
		if cause := context.Cause(ctx); errors.Is(cause, fairqueue.ErrWorkerReclaimed) && !errors.Is(err, fairqueue.ErrWorkerReclaimed) {
			if err == nil {
				return reconcile.Result{}, cause
			}
			return reconcile.Result{}, fmt.Errorf("%w: %w", cause, err)
		}
		return result, err
	})
}

// recorded runs rec and tells outcomes, if set, how each reconcile ended.
// The error, which may quote the member, is returned printable and bounded
// (v1alpha1.PrintableError) for controller-runtime to log.
func recorded(rec reconcile.TypedReconciler[mcreconcile.Request], outcomes OutcomeRecorder) reconcile.TypedReconciler[mcreconcile.Request] {
	return reconcile.TypedFunc[mcreconcile.Request](func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		result, err := rec.Reconcile(ctx, req)
		if outcomes != nil {
			outcomes.RecordOutcome(req.ClusterName, req.NamespacedName, err)
		}
		return result, v1alpha1.PrintableError(err)
	})
}

// Start runs the controller until ctx ends; meanwhile its engaged members'
// share of the queue is served as widgethub_workqueue_member_* metrics.
func (c *Controller) Start(ctx context.Context) error {
	memberQueues.track(c)
	defer memberQueues.untrack(c)
	return c.TypedController.Start(ctx)
}

func (c *Controller) setQueue(q *fairqueue.Queue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = q
}

// memberQueueLens returns the ready and in-flight requests of each engaged
// member (zero before the queue is built).
func (c *Controller) memberQueueLens() map[multicluster.ClusterName][2]int {
	c.mu.Lock()
	names := make([]multicluster.ClusterName, 0, len(c.engaged))
	for name := range c.engaged {
		names = append(names, name)
	}
	q := c.queue
	c.mu.Unlock()
	lens := make(map[multicluster.ClusterName][2]int, len(names))
	for _, name := range names {
		var ready, inFlight int
		if q != nil {
			ready, inFlight = q.MemberLen(name)
		}
		lens[name] = [2]int{ready, inFlight}
	}
	return lens
}

// Engage starts the controller's sources on cl until ctx ends. Engaging the
// same cluster again is a no-op; engaging another cluster under the same
// name replaces the old engagement.
func (c *Controller) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	c.mu.Lock()
	if old, ok := c.engaged[name]; ok {
		if old.cluster == cl && old.ctx.Err() == nil {
			c.mu.Unlock()
			return nil
		}
		old.cancel()
	}
	engCtx, cancel := context.WithCancel(ctx)
	e := &engagement{cluster: cl, ctx: engCtx, cancel: cancel}
	c.engaged[name] = e
	c.mu.Unlock()
	context.AfterFunc(engCtx, func() { c.forget(name, e) })

	for _, s := range c.sources {
		src, ok, err := s.ForCluster(name, cl)
		if err != nil {
			cancel()
			return fmt.Errorf("source for cluster %q: %w", name, err)
		}
		if !ok {
			continue
		}
		if err := c.Watch(within(engCtx, src)); err != nil {
			cancel()
			return fmt.Errorf("watch cluster %q: %w", name, err)
		}
	}
	return nil
}

func (c *Controller) forget(name multicluster.ClusterName, e *engagement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.engaged[name] == e {
		delete(c.engaged, name)
	}
}

// within runs src until the engagement context or the controller's context
// ends, whichever comes first, without a goroutine waiting on either.
func within(engCtx context.Context, src source.TypedSource[mcreconcile.Request]) source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(ctrlCtx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		ctx, cancel := context.WithCancel(engCtx)
		stop := context.AfterFunc(ctrlCtx, cancel)
		context.AfterFunc(ctx, func() { stop() })
		return src.Start(ctx, q)
	})
}
