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
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
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
