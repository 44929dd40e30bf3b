package members

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

// A member's next probe is brought forward to when its lastProbeTime is due,
// not sooner than half an interval; a retry, a wait longer than a probe's and
// a due time past the next probe are left alone.
func TestProbeByBringsTheNextProbeForwardToTheRefresh(t *testing.T) {
	const interval = 5 * time.Second
	for _, c := range []struct {
		name  string
		after time.Duration
		err   error
		due   time.Duration
		want  time.Duration
	}{
		{name: "due before the next probe", after: interval, due: 3 * time.Second, want: 3 * time.Second},
		{name: "due within half an interval", after: interval, due: time.Second, want: interval / 2},
		{name: "due after the next probe", after: interval, due: 40 * time.Second, want: interval},
		{name: "a probe answered from the last, sooner", after: 2 * time.Second, due: 3 * time.Second, want: 2 * time.Second},
		{name: "a longer wait than a probe's", after: time.Minute, due: 3 * time.Second, want: time.Minute},
		{name: "a failure, retried with backoff", err: errors.New("engage"), due: 3 * time.Second},
	} {
		obs := observation{result: reconcile.Result{RequeueAfter: c.after}, err: c.err}
		obs.probeBy(c.due, interval)
		if obs.result.RequeueAfter != c.want {
			t.Errorf("%s: next reconcile after %s, want %s", c.name, obs.result.RequeueAfter, c.want)
		}
	}
}
