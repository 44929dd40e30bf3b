package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

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
	ctrlmetrics.Registry.MustRegister(queueDepth, queueAdds, queueLatency, queueWork, queueUnfinished, queueLongest, queueRetries, queueUnresponsive)
}

// queueMetricsProvider reports a queue's measurements as widgethub_workqueue_* metrics.
type queueMetricsProvider struct{}

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
