package clusters

import (
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// The Events a Member's recorders send to its API server: up to EventBurst at
// once, then EventsPerSecond. Events are best effort and each is a write: when
// thousands of Widgets arrive at once, one Event per Widget would take a third
// of the member API server's writes from the Deployments and statuses that
// matter. Events beyond the budget are dropped and counted in
// widgethub_member_events_dropped_total.
const (
	EventsPerSecond = 10
	EventBurst      = 100
)

// GetEventRecorder returns a recorder of the member's Events named name, within
// the member's Event budget.
func (m *Member) GetEventRecorder(name string) events.EventRecorder {
	return budgetedRecorder{next: m.Cluster.GetEventRecorder(name), member: m}
}

// budgetedRecorder sends an Event only when its member's budget allows.
type budgetedRecorder struct {
	next   events.EventRecorder
	member *Member
}

func (r budgetedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if !r.member.events.Allow() {
		MemberEventsDropped.WithLabelValues(r.member.name).Inc()
		return
	}
	PrintableRecorder(r.next).Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func newEventBudget() *rate.Limiter { return rate.NewLimiter(EventsPerSecond, EventBurst) }
