package members

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
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

func init() {
	ctrlmetrics.Registry.MustRegister(registrations)
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
