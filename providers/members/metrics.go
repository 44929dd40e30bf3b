package members

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/widgethub/widgethub/clusters"
)

// registrations serves widgethub_registrations: the registrations on the
// hub (Secrets and ClusterProfiles), counted from the hub cache at each
// scrape by the running providers. It is served only while a provider runs: on the leader without
// sharding, on every replica with it. Compared with the members some replica
// serves (their widgethub_member_ready series), it tells whether every
// registered member is served; its absence, that no replica serves any.
var registrations = &registrationCollector{
	providers: map[*Provider]struct{}{},
	desc: prometheus.NewDesc("widgethub_registrations",
		"Registrations on the hub (kubeconfig Secrets and ClusterProfiles), served by the replicas that serve members (the leader, or every replica when sharded).", nil, nil),
}

// countTimeout bounds the count at a scrape (the hub cache answers at once
// once synced).
const countTimeout = 5 * time.Second

// The health of each member this replica serves, labelled by cluster (the
// member's name), and the outcomes of its Widgets' reconciles
// (RecordOutcome). Their series are removed when the member is no longer
// served here (forgetMetrics).
var (
	memberReady = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_ready",
		Help: "1 when the member is engaged and healthy, 0 otherwise."})
	memberEngagedSince = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_engaged_since_seconds",
		Help: "Unix time at which the member's current engagement began; 0 when not engaged."})
	memberProbeDuration = perMember(prometheus.NewHistogramVec, prometheus.HistogramOpts{Name: "widgethub_member_probe_duration_seconds",
		Help: "Latency of the member health probes.", Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}})
	memberProbeFailures = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_probe_failures_total",
		Help: "Health probes of the member that failed."})
	memberWidgets = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_widgets",
		Help: "Widgets in the member, as last counted from its cache."})
	memberReconciles = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_reconciles_total",
		Help: "Widget reconciles in the member, failed or not."})
	memberReconcileErrors = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_reconcile_errors_total",
		Help: "Widget reconciles in the member that returned an error."})
	memberCredentialsExpiry = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_credentials_expiry_timestamp_seconds",
		Help: "Unix time at which the member's registration token expires; absent when unknown (no token, or not a JWT)."})
	memberCredentialsExpiring = perMember(prometheus.NewGaugeVec, prometheus.GaugeOpts{Name: "widgethub_member_credentials_expiring",
		Help: "1 while the member's credentials will expire without renewal (its renewal fails, or a token the hub does not renew is about to expire), else 0."})
	memberCredentialRenewalFailures = perMember(prometheus.NewCounterVec, prometheus.CounterOpts{Name: "widgethub_member_credentials_renewal_failures_total",
		Help: "Attempts of the hub to renew the member's token that failed."})

	perMemberVecs = []interface{ DeletePartialMatch(prometheus.Labels) int }{memberReady, memberEngagedSince,
		memberProbeDuration, memberProbeFailures, memberWidgets, memberReconciles, memberReconcileErrors,
		memberCredentialsExpiry, memberCredentialsExpiring, memberCredentialRenewalFailures}
)

// perMember builds a metric vector labelled by cluster with newVec.
func perMember[O any, V any](newVec func(O, []string) V, opts O) V {
	return newVec(opts, []string{clusters.MetricsLabel})
}

func init() {
	ctrlmetrics.Registry.MustRegister(registrations, memberReady, memberEngagedSince, memberProbeDuration,
		memberProbeFailures, memberWidgets, memberReconciles, memberReconcileErrors,
		memberCredentialsExpiry, memberCredentialsExpiring, memberCredentialRenewalFailures)
}

// startCounters serves a member's counters from zero if they are not served
// yet (a member that has just been engaged), so that rate() and increase()
// count its first failure too.
func startCounters(cluster string) {
	memberProbeFailures.WithLabelValues(cluster)
	memberReconciles.WithLabelValues(cluster)
	memberReconcileErrors.WithLabelValues(cluster)
	clusters.StartCounters(cluster)
}

// forgetMetrics deletes every series of the member called cluster.
func forgetMetrics(cluster string) {
	labels := prometheus.Labels{clusters.MetricsLabel: cluster}
	for _, vec := range perMemberVecs {
		vec.DeletePartialMatch(labels)
	}
	clusters.ForgetMetrics(cluster)
}

// registrationCollector is a prometheus.Collector over the running providers.
type registrationCollector struct {
	mu        sync.Mutex
	providers map[*Provider]struct{}
	desc      *prometheus.Desc
}

func (c *registrationCollector) track(p *Provider) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.providers[p] = struct{}{}
}

func (c *registrationCollector) untrack(p *Provider) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.providers, p)
}

func (c *registrationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect serves the sum over the running providers (a process runs one;
// tests may run several), nothing when none runs or one cannot count.
func (c *registrationCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	providers := make([]*Provider, 0, len(c.providers))
	for p := range c.providers {
		providers = append(providers, p)
	}
	c.mu.Unlock()
	if len(providers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
	defer cancel()
	total := 0
	for _, p := range providers {
		n, err := p.countRegistrations(ctx)
		if err != nil {
			// Not served rather than failing the whole scrape; the
			// alerts read a lasting absence.
			p.log.Error(err, "Cannot serve widgethub_registrations")
			return
		}
		total += n
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(total))
}

// countRegistrations counts the registrations of every source in the hub
// cache, as reconcile sees them: a member name two of them claim counts once.
func (p *Provider) countRegistrations(ctx context.Context) (int, error) {
	names := map[string]bool{}
	for _, sc := range p.sources {
		list, err := sc.List(ctx)
		if err != nil {
			return 0, fmt.Errorf("count the %s registrations: %w", sc.Kind(), err)
		}
		for _, r := range list {
			names[r.Owner.GetName()] = true
		}
	}
	return len(names), nil
}
