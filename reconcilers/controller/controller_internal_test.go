package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/reconcilers/controller/fairqueue"
)

// Each Reconcile call gets ReconcileTimeout as its deadline (a minute unless
// set, none when negative), and a reconcile that waits on its context ends
// when the deadline passes.
func TestReconcileHasADeadline(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		// want is the deadline's distance from the call; zero: no deadline.
		want time.Duration
	}{
		{"default", 0, DefaultReconcileTimeout},
		{"set", 200 * time.Millisecond, 200 * time.Millisecond},
		{"none", -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			type call struct {
				left time.Duration // until the deadline, at the call
				has  bool
				err  error // the context's when the reconcile returned
			}
			calls := make(chan call, 1)
			rec := reconcile.TypedFunc[mcreconcile.Request](func(ctx context.Context, _ mcreconcile.Request) (reconcile.Result, error) {
				deadline, has := ctx.Deadline()
				got := call{left: time.Until(deadline), has: has}
				if has && c.want < time.Second {
					<-ctx.Done() // a reconcile stuck on a member that never answers
				}
				got.err = ctx.Err()
				calls <- got
				return reconcile.Result{}, nil
			})
			inner, err := newUnmanaged(testControllerName("deadline-"+c.name), Options{Reconciler: rec, MaxConcurrentReconciles: 1, ReconcileTimeout: c.timeout}, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = inner.Watch(source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
				q.Add(mcreconcile.Request{ClusterName: "a", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "w"}}})
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			stopped := make(chan error)
			go func() { stopped <- inner.Start(ctx) }()
			var got call
			select {
			case got = <-calls:
			case <-time.After(time.Minute):
				t.Fatal("the reconcile did not return")
			}
			cancel()
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == 0 && got.has:
				t.Fatalf("the reconcile has a deadline %s away, want none", got.left)
			case c.want != 0 && (!got.has || got.left > c.want || got.left < c.want-time.Second):
				t.Fatalf("the reconcile's deadline is %s away (set: %v), want %s", got.left, got.has, c.want)
			case c.want != 0 && c.want < time.Second && !errors.Is(got.err, context.DeadlineExceeded):
				t.Fatalf("the reconcile waiting on its context ended with %v, want its deadline", got.err)
			}
		})
	}
}

// testControllers numbers the controllers the tests build: controller-runtime
// refuses a controller name twice in one process, and go test -count=N runs
// each test N times in one.
var testControllers atomic.Int64

func testControllerName(base string) string {
	return fmt.Sprintf("%s-%d", base, testControllers.Add(1))
}

// A reconcile that waits on a member that never answers gives its worker
// back, once every worker has been busy for fairqueue.DefaultReclaimAfter,
// to a member with a request and nothing in flight: its context ends with
// fairqueue.ErrWorkerReclaimed, and the request is retried.
func TestReclaimedReconcileGivesItsWorkerToAQuietMemberAndIsRetried(t *testing.T) {
	type call struct {
		req   mcreconcile.Request
		cause error // the context's cause when the reconcile returned
	}
	calls := make(chan call, 10)
	var silentCalls atomic.Int64
	rec := reconcile.TypedFunc[mcreconcile.Request](func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		if req.ClusterName == "silent" && silentCalls.Add(1) == 1 {
			<-ctx.Done() // its writes are black-holed
		}
		calls <- call{req, context.Cause(ctx)}
		return reconcile.Result{}, nil
	})
	inner, err := newUnmanaged(testControllerName("reclaim"), Options{Reconciler: rec, MaxConcurrentReconciles: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	request := func(cluster string) mcreconcile.Request {
		return mcreconcile.Request{ClusterName: multicluster.ClusterName(cluster), Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "w"}}}
	}
	added := make(chan workqueue.TypedRateLimitingInterface[mcreconcile.Request], 1)
	err = inner.Watch(source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		q.Add(request("silent"))
		added <- q
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error)
	go func() { stopped <- inner.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	}()
	q := <-added
	for silentCalls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	q.Add(request("quiet"))

	next := func() call {
		t.Helper()
		select {
		case c := <-calls:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("no reconcile returned within 30s")
		}
		return call{}
	}
	first, second := next(), next()
	took := time.Since(start)
	if first.req != request("silent") || !errors.Is(first.cause, fairqueue.ErrWorkerReclaimed) {
		t.Fatalf("first to return: %v with cause %v, want the silent member's, reclaimed", first.req, first.cause)
	}
	if second.req != request("quiet") {
		t.Fatalf("the reclaimed worker went to %v, want the quiet member's request", second.req)
	}
	t.Logf("the quiet member's request reconciled %s after it was added (one worker, held by a member that does not answer)", took.Round(time.Millisecond))
	if retried := next(); retried.req != request("silent") {
		t.Fatalf("reconciled %v, want the reclaimed request retried", retried.req)
	}
}
