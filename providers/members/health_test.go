package members

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestFailingWidgetsCountsWidgetsByTheirLatestReconcile(t *testing.T) {
	var f failingWidgets
	retried := types.NamespacedName{Namespace: "shop", Name: "retried"}
	recovered := types.NamespacedName{Namespace: "shop", Name: "recovered"}
	for range 20 {
		f.record(retried, true)
		f.record(recovered, true)
	}
	if n := f.count(); n != 2 {
		t.Errorf("after 20 failures each of 2 Widgets: %d failing, want 2", n)
	}
	f.record(recovered, false)
	f.record(types.NamespacedName{Namespace: "shop", Name: "fine"}, false)
	if n := f.count(); n != 1 {
		t.Errorf("after one Widget recovered: %d failing, want 1 (retried)", n)
	}
	f.record(retried, false)
	if n := f.count(); n != 0 {
		t.Errorf("after both recovered: %d failing, want 0", n)
	}
}
