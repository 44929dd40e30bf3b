package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// controller-runtime registers client-go's workqueue_* series for the queues
// it builds but keeps its provider internal; the shared fair queue reports the
// same measurements under widgethub_workqueue_*, labelled by queue name.
var (
	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "widgethub_workqueue_depth", Help: "Requests waiting in the shared queue.",
	}, []string{"name"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "widgethub_workqueue_adds_total", Help: "Requests added to the shared queue.",
	}, []string{"name"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "widgethub_workqueue_queue_duration_seconds", Help: "Time a request waits in the shared queue.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"name"})
	queueWork = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "widgethub_workqueue_work_duration_seconds", Help: "Time a request takes to reconcile.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"name"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "widgethub_workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration.",
	}, []string{"name"})
	queueLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "widgethub_workqueue_longest_running_processor_seconds", Help: "How long the longest running reconcile has run.",
	}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "widgethub_workqueue_retries_total", Help: "Rate-limited requeues of the shared queue.",
	}, []string{"name"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(queueDepth, queueAdds, queueLatency, queueWork, queueUnfinished, queueLongest, queueRetries)
}

// queueMetricsProvider reports a queue's measurements as widgethub_workqueue_* metrics.
type queueMetricsProvider struct{}

var _ workqueue.MetricsProvider = queueMetricsProvider{}

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
