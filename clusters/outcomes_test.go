package clusters

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestOutcomesCountWidgetsByTheirLatestReconcile(t *testing.T) {
	var o widgetOutcomes
	retried := types.NamespacedName{Namespace: "shop", Name: "retried"}
	recovered := types.NamespacedName{Namespace: "shop", Name: "recovered"}
	for range 20 {
		o.record(retried, true)
		o.record(recovered, true)
	}
	o.record(recovered, false)
	o.record(types.NamespacedName{Namespace: "shop", Name: "fine"}, false)
	if _, _, ok := o.take(4); ok {
		t.Error("take(4) of 3 Widgets reported them")
	}
	if widgets, failing, ok := o.take(3); !ok || widgets != 3 || failing != 1 {
		t.Errorf("take(3) = %d Widgets, %d failing, %v; want 3 Widgets, 1 failing (retried), true", widgets, failing, ok)
	}
	if widgets, _, ok := o.take(0); !ok || widgets != 0 {
		t.Errorf("after a take: %d Widgets, %v; want none, counted anew", widgets, ok)
	}
}

func TestOutcomesRememberABoundedNumberOfWidgets(t *testing.T) {
	var o widgetOutcomes
	for i := range maxJudgedWidgets + 50 {
		o.record(types.NamespacedName{Namespace: "flood", Name: fmt.Sprint(i)}, false)
	}
	// A Widget already remembered still has its latest outcome recorded.
	o.record(types.NamespacedName{Namespace: "flood", Name: "0"}, true)
	if widgets, failing, _ := o.take(0); widgets != maxJudgedWidgets || failing != 1 {
		t.Errorf("counts = %d Widgets, %d failing; want %d, 1", widgets, failing, maxJudgedWidgets)
	}
}
