package clusters

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const clusterLabel = "cluster"

var (
	// MemberReady is 1 while the member is engaged and answers its probes, else 0.
	MemberReady = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_ready",
		Help: "1 when the member is engaged and healthy, 0 otherwise."})
	// MemberEngagedSince is the Unix time the member's current engagement began.
	MemberEngagedSince = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_engaged_since_seconds",
		Help: "Unix time at which the member's current engagement began; 0 when not engaged."})
	// MemberProbeDuration observes each health probe's latency.
	MemberProbeDuration = perMember(prometheus.NewHistogramVec, prometheus.HistogramOpts{Name: "widgethub_member_probe_duration_seconds",
		Help: "Latency of the member health probes.", Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}})
	// MemberProbeFailures counts failed health probes.
	MemberProbeFailures = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_probe_failures_total",
		Help: "Health probes of the member that failed."})
	// MemberWidgets is how many Widgets the member holds, as last counted.
	MemberWidgets = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_widgets",
		Help: "Widgets in the member, as last counted from its cache."})
	// MemberEventsDropped counts the Events not sent to the member because its
	// Event budget was spent.
	MemberEventsDropped = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_events_dropped_total",
		Help: "Events for the member dropped because they exceeded its Event budget."})
	// Reconciles counts the Widget reconciles of the member (Member.RecordReconcile).
	Reconciles = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_reconciles_total",
		Help: "Widget reconciles in the member, failed or not."})
	// ReconcileErrors counts Widget reconciles that returned an error.
	ReconcileErrors = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_reconcile_errors_total",
		Help: "Widget reconciles in the member that returned an error."})
	// MemberCredentialsExpiry is when the registration's token expires.
	MemberCredentialsExpiry = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_credentials_expiry_timestamp_seconds",
		Help: "Unix time at which the member's registration token expires; absent when unknown (no token, or not a JWT)."})
	// MemberCredentialsExpiring is 1 while the MemberCluster's
	// CredentialsExpiring condition is True.
	MemberCredentialsExpiring = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_credentials_expiring",
		Help: "1 while the member's credentials will expire without renewal (its renewal fails, or a token the hub does not renew is about to expire), else 0."})
	// MemberCredentialRenewalFailures counts the failed renewals of the
	// member's token.
	MemberCredentialRenewalFailures = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_credentials_renewal_failures_total",
		Help: "Attempts of the hub to renew the member's token that failed."})
)

// perMember builds a metric vector labelled by cluster with newVec.
func perMember[O any, V any](newVec func(O, []string) V, opts O) V {
	return newVec(opts, []string{clusterLabel})
}

func init() {
	ctrlmetrics.Registry.MustRegister(MemberReady, MemberEngagedSince, MemberProbeDuration,
		MemberProbeFailures, MemberWidgets, MemberEventsDropped, Reconciles, ReconcileErrors,
		MemberCredentialsExpiry, MemberCredentialsExpiring, MemberCredentialRenewalFailures)
}

// startCounters serves the member's counters from zero if they are not
// served yet (a member that has just synced), so that rate() and increase()
// count its first failure too.
func startCounters(cluster string) {
	MemberProbeFailures.WithLabelValues(cluster)
	MemberEventsDropped.WithLabelValues(cluster)
	Reconciles.WithLabelValues(cluster)
	ReconcileErrors.WithLabelValues(cluster)
}

// ForgetMetrics deletes every series of the member called cluster.
func ForgetMetrics(cluster string) {
	labels := prometheus.Labels{clusterLabel: cluster}
	MemberReady.DeletePartialMatch(labels)
	MemberEngagedSince.DeletePartialMatch(labels)
	MemberProbeDuration.DeletePartialMatch(labels)
	MemberProbeFailures.DeletePartialMatch(labels)
	MemberEventsDropped.DeletePartialMatch(labels)
	MemberWidgets.DeletePartialMatch(labels)
	Reconciles.DeletePartialMatch(labels)
	ReconcileErrors.DeletePartialMatch(labels)
	MemberCredentialsExpiry.DeletePartialMatch(labels)
	MemberCredentialsExpiring.DeletePartialMatch(labels)
	MemberCredentialRenewalFailures.DeletePartialMatch(labels)
}
