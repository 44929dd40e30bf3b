package fairqueue

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// TestInitialListPriority records which handlers pass controller-runtime's
// initial-list hint on to the queue. If multicluster-runtime starts passing it,
// this test fails and the fairness design can lean on it.
func TestInitialListPriority(t *testing.T) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}}
	tests := []struct {
		name         string
		handler      handler.TypedEventHandler[client.Object, mcreconcile.Request]
		wantPriority int
	}{{
		name:         "multicluster-runtime's EnqueueRequestForObject, as mcbuilder's For uses",
		handler:      mchandler.EnqueueRequestForObject("member", nil),
		wantPriority: 0,
	}, {
		name: "controller-runtime's TypedFuncs on multicluster requests",
		handler: handler.TypedFuncs[client.Object, mcreconcile.Request]{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				q.Add(req("member", e.Object.GetName()))
			},
		},
		wantPriority: handler.LowPriority,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := newTestQueue(t)
			tt.handler.Create(t.Context(), event.TypedCreateEvent[client.Object]{Object: obj, IsInInitialList: true}, q)
			r, p, _ := q.GetWithPriority()
			if r != req("member", "x") || p != tt.wantPriority {
				t.Fatalf("GetWithPriority = %v, %d; want %v, %d", r, p, req("member", "x"), tt.wantPriority)
			}
			q.Done(r)
		})
	}
}
