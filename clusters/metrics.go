package clusters

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricsLabel is the label that names the member in per-member metrics.
const MetricsLabel = "cluster"

// MemberEventsDropped counts the Events not sent to a member because its
// Event budget was spent (events.go).
var MemberEventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "widgethub_member_events_dropped_total",
	Help: "Events for the member dropped because they exceeded its Event budget."}, []string{MetricsLabel})

func init() {
	ctrlmetrics.Registry.MustRegister(MemberEventsDropped)
}

// StartCounters serves the member's counters from zero if they are not
// served yet, so that rate() and increase() count its first drop too.
func StartCounters(cluster string) {
	MemberEventsDropped.WithLabelValues(cluster)
}

// ForgetMetrics deletes the series of the member called cluster.
func ForgetMetrics(cluster string) {
	MemberEventsDropped.DeletePartialMatch(prometheus.Labels{MetricsLabel: cluster})
}
