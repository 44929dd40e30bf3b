package clusters

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/widgethub/widgethub/internal/metrics"
)

func TestEventsBeyondTheBudgetAreDroppedAndCounted(t *testing.T) {
	const budget, sent = 3, 10
	m := &Member{name: t.Name(), events: rate.NewLimiter(0, budget)}
	t.Cleanup(func() { metrics.Forget(m.name) })
	recorded := events.NewFakeRecorder(sent)
	r := budgetedRecorder{next: recorded, member: m}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}}
	for i := range sent {
		r.Eventf(obj, nil, corev1.EventTypeNormal, "Test", "Test", "event %d", i)
	}
	if got := len(recorded.Events); got != budget {
		t.Errorf("%d Events sent, want the budget of %d", got, budget)
	}
	if got := testutil.ToFloat64(metrics.MemberEventsDropped.WithLabelValues(m.name)); got != sent-budget {
		t.Errorf("widgethub_member_events_dropped_total = %g, want %d", got, sent-budget)
	}
}
