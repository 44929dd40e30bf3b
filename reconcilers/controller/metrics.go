package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/reconcilers/controller/fairqueue"
)

// controller-runtime registers client-go's workqueue_* series for the queues
// it builds but keeps its provider internal; the shared fair queue reports the
// same measurements under widgethub_workqueue_*, labelled by queue name.
var (
	queueDepth      = gaugeVec("widgethub_workqueue_depth", "Requests waiting in the shared queue.")
	queueAdds       = counterVec("widgethub_workqueue_adds_total", "Requests added to the shared queue.")
	queueLatency    = histogramVec("widgethub_workqueue_queue_duration_seconds", "Time a request waits in the shared queue.")
	queueWork       = histogramVec("widgethub_workqueue_work_duration_seconds", "Time a request takes to reconcile.")
	queueUnfinished = gaugeVec("widgethub_workqueue_unfinished_work_seconds", "Seconds of work in progress not yet observed by work_duration.")
	queueLongest    = gaugeVec("widgethub_workqueue_longest_running_processor_seconds", "How long the longest running reconcile has run.")
	queueRetries    = counterVec("widgethub_workqueue_retries_total", "Rate-limited requeues of the shared queue.")
	// queueUnresponsive is fairqueue's own measurement, not client-go's.
	queueUnresponsive = gaugeVec("widgethub_workqueue_unresponsive_in_flight",
		"Requests in flight of members that do not answer (one unanswered since it was handed out, or in flight for 5s); between them they hold at most the per-member bound of workers.")
)

// gaugeVec, counterVec and histogramVec build the shared queue's metrics,
// labelled by queue name; histograms have buckets from 1 ms to about 4.4 min.
func gaugeVec(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"name"})
}

func counterVec(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"name"})
}

func histogramVec(name, help string) *prometheus.HistogramVec {
	opts := prometheus.HistogramOpts{Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}
	return prometheus.NewHistogramVec(opts, []string{"name"})
}

func init() {
	ctrlmetrics.Registry.MustRegister(queueDepth, queueAdds, queueLatency, queueWork, queueUnfinished, queueLongest, queueRetries, queueUnresponsive,
		memberQueues)
}

// memberQueues serves each engaged member's share of the shared queue,
// read from the running controllers at each scrape: one series per member
// and queue, there while the member is engaged with the controller and gone
// with its engagement (unregistered, parked, or handed to another replica).
var memberQueues = &memberQueueCollector{
	controllers: map[*Controller]struct{}{},
	depth: prometheus.NewDesc("widgethub_workqueue_member_depth",
		"Requests of the member waiting in the shared queue, ready to be handed out.", []string{"name", "cluster"}, nil),
	inFlight: prometheus.NewDesc("widgethub_workqueue_member_in_flight",
		"Requests of the member handed out to workers and not yet done.", []string{"name", "cluster"}, nil),
}

// memberQueueCollector is a prometheus.Collector over the running controllers.
type memberQueueCollector struct {
	mu              sync.Mutex
	controllers     map[*Controller]struct{}
	depth, inFlight *prometheus.Desc
}

func (m *memberQueueCollector) track(c *Controller) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.controllers[c] = struct{}{}
}

func (m *memberQueueCollector) untrack(c *Controller) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.controllers, c)
}

func (m *memberQueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.depth
	ch <- m.inFlight
}

// Collect sums the controllers of one name (a process runs one of each, but
// tests may run several), so that no series is served twice.
func (m *memberQueueCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct {
		name    string
		cluster multicluster.ClusterName
	}
	m.mu.Lock()
	controllers := make([]*Controller, 0, len(m.controllers))
	for c := range m.controllers {
		controllers = append(controllers, c)
	}
	m.mu.Unlock()
	sums := map[key][2]int{}
	for _, c := range controllers {
		for cluster, lens := range c.memberQueueLens() {
			k := key{c.name, cluster}
			s := sums[k]
			sums[k] = [2]int{s[0] + lens[0], s[1] + lens[1]}
		}
	}
	for k, s := range sums {
		ch <- prometheus.MustNewConstMetric(m.depth, prometheus.GaugeValue, float64(s[0]), k.name, string(k.cluster))
		ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(s[1]), k.name, string(k.cluster))
	}
}

// queueMetricsProvider reports a queue's measurements as widgethub_workqueue_* metrics.
type queueMetricsProvider struct{}

// QueueMetricsProvider reports the measurements of a fair queue as
// widgethub_workqueue_* metrics labelled with the queue's name, for other
// controllers that use the fair queue (the registrations' in
// providers/members).
func QueueMetricsProvider() workqueue.MetricsProvider { return queueMetricsProvider{} }

var _ fairqueue.UnresponsiveMetricsProvider = queueMetricsProvider{}

func (queueMetricsProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}

func (queueMetricsProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}

func (queueMetricsProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}

func (queueMetricsProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWork.WithLabelValues(name)
}

func (queueMetricsProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}

func (queueMetricsProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongest.WithLabelValues(name)
}

func (queueMetricsProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}

func (queueMetricsProvider) NewUnresponsiveInFlightMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnresponsive.WithLabelValues(name)
}
