package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// widgethub_workqueue_member_depth and _member_in_flight serve one series per
// member engaged with a running controller: its requests ready and in
// flight, zero when it has none, gone when its engagement ends or the
// controller stops.
func TestMemberQueueSeriesFollowEngagements(t *testing.T) {
	name := testControllerName("member-queue-test")
	release := make(chan struct{})
	rec := reconcile.TypedFunc[mcreconcile.Request](func(ctx context.Context, _ mcreconcile.Request) (reconcile.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return reconcile.Result{}, nil
	})
	c := &Controller{name: name, engaged: map[multicluster.ClusterName]*engagement{}}
	inner, err := newUnmanaged(name, Options{Reconciler: rec, MaxConcurrentReconciles: 1}, c.setQueue)
	if err != nil {
		t.Fatal(err)
	}
	c.TypedController = inner
	request := func(cluster, obj string) mcreconcile.Request {
		return mcreconcile.Request{ClusterName: multicluster.ClusterName(cluster), Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: obj}}}
	}
	err = c.Watch(source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		// One worker: a's first request is in flight, the others wait.
		q.Add(request("a", "1"))
		q.Add(request("a", "2"))
		q.Add(request("b", "1"))
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- c.Start(ctx) }()
	defer func() {
		close(release)
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
		expectMemberQueueSeries(t, name, "", "")
	}()

	engCtx, disengage := context.WithCancel(ctx)
	for _, m := range []multicluster.ClusterName{"a", "b", "c"} {
		if err := c.Engage(engCtx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	expectMemberQueueSeries(t, name, fmt.Sprintf(`
widgethub_workqueue_member_depth{cluster="a",name=%[1]q} 1
widgethub_workqueue_member_depth{cluster="b",name=%[1]q} 1
widgethub_workqueue_member_depth{cluster="c",name=%[1]q} 0
`, name), fmt.Sprintf(`
widgethub_workqueue_member_in_flight{cluster="a",name=%[1]q} 1
widgethub_workqueue_member_in_flight{cluster="b",name=%[1]q} 0
widgethub_workqueue_member_in_flight{cluster="c",name=%[1]q} 0
`, name))
	disengage()
	expectMemberQueueSeries(t, name, "", "")
}

// expectMemberQueueSeries waits until the member queue series are depth and
// inFlight (text exposition lines without HELP and TYPE; empty: none).
func expectMemberQueueSeries(t *testing.T, name, depth, inFlight string) {
	t.Helper()
	var expected string
	if depth != "" {
		expected += "# HELP widgethub_workqueue_member_depth Requests of the member waiting in the shared queue, ready to be handed out.\n" +
			"# TYPE widgethub_workqueue_member_depth gauge" + depth
	}
	if inFlight != "" {
		expected += "# HELP widgethub_workqueue_member_in_flight Requests of the member handed out to workers and not yet done.\n" +
			"# TYPE widgethub_workqueue_member_in_flight gauge" + inFlight
	}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err = testutil.CollectAndCompare(memberQueues, strings.NewReader(expected)); err == nil {
			return
		}
	}
	t.Fatalf("member queue series of %s: %v", name, err)
}
