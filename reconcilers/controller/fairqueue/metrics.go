package fairqueue

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// unfinishedWorkUpdatePeriod is how often the in-flight gauges are updated, as in client-go.
const unfinishedWorkUpdatePeriod = 500 * time.Millisecond

// UnresponsiveMetricsProvider is a workqueue.MetricsProvider that also
// takes the number of requests in flight of unresponsive members.
type UnresponsiveMetricsProvider interface {
	workqueue.MetricsProvider
	NewUnresponsiveInFlightMetric(name string) workqueue.SettableGaugeMetric
}

// queueMetrics reports client-go's workqueue metrics. A nil *queueMetrics
// reports nothing; its methods are called with the queue's lock held.
type queueMetrics struct {
	clock                   clock.Clock
	depth                   workqueue.GaugeMetric
	adds                    workqueue.CounterMetric
	latency                 workqueue.HistogramMetric
	workDuration            workqueue.HistogramMetric
	unfinishedWorkSeconds   workqueue.SettableGaugeMetric
	longestRunningProcessor workqueue.SettableGaugeMetric
	retries                 workqueue.CounterMetric
	// unresponsiveInFlight is nil unless the provider takes it.
	unresponsiveInFlight workqueue.SettableGaugeMetric
	// inFlight holds the entries being processed, for the in-flight gauges.
	inFlight map[*entry]struct{}
}

func newQueueMetrics(p workqueue.MetricsProvider, name string, c clock.Clock) *queueMetrics {
	if p == nil || name == "" {
		return nil
	}
	m := &queueMetrics{
		clock:                   c,
		depth:                   p.NewDepthMetric(name),
		adds:                    p.NewAddsMetric(name),
		latency:                 p.NewLatencyMetric(name),
		workDuration:            p.NewWorkDurationMetric(name),
		unfinishedWorkSeconds:   p.NewUnfinishedWorkSecondsMetric(name),
		longestRunningProcessor: p.NewLongestRunningProcessorSecondsMetric(name),
		retries:                 p.NewRetriesMetric(name),
		inFlight:                map[*entry]struct{}{},
	}
	if up, ok := p.(UnresponsiveMetricsProvider); ok {
		m.unresponsiveInFlight = up.NewUnresponsiveInFlightMetric(name)
	}
	return m
}

// add records that e became ready.
func (m *queueMetrics) add(e *entry) {
	if m == nil {
		return
	}
	m.adds.Inc()
	m.depth.Inc()
	e.addedAt = m.clock.Now()
}

// get records that e was handed out.
func (m *queueMetrics) get(e *entry) {
	if m == nil {
		return
	}
	m.depth.Dec()
	now := m.clock.Now()
	m.latency.Observe(now.Sub(e.addedAt).Seconds())
	e.startedAt = now
	m.inFlight[e] = struct{}{}
}

// done records that e was processed.
func (m *queueMetrics) done(e *entry) {
	if m == nil {
		return
	}
	m.workDuration.Observe(m.clock.Since(e.startedAt).Seconds())
	delete(m.inFlight, e)
}

func (m *queueMetrics) retry() {
	if m == nil {
		return
	}
	m.retries.Inc()
}

// updateUnfinishedWork sets the in-flight gauges.
func (m *queueMetrics) updateUnfinishedWork() {
	var total, longest float64
	now := m.clock.Now()
	for e := range m.inFlight {
		d := now.Sub(e.startedAt).Seconds()
		total += d
		longest = max(longest, d)
	}
	m.unfinishedWorkSeconds.Set(total)
	m.longestRunningProcessor.Set(longest)
}

// updateInFlightMetrics sets the gauges that follow the clock; q.mu is held.
func (q *Queue) updateInFlightMetrics() {
	q.metrics.updateUnfinishedWork()
	if q.metrics.unresponsiveInFlight != nil {
		q.metrics.unresponsiveInFlight.Set(float64(q.unresponsiveInFlight(q.clock.Now())))
	}
}

// metricsLoop updates the in-flight gauges until the queue shuts down.
func (q *Queue) metricsLoop() {
	t := q.clock.NewTimer(unfinishedWorkUpdatePeriod)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-t.C():
		}
		q.mu.Lock()
		q.updateInFlightMetrics()
		q.mu.Unlock()
		t.Reset(unfinishedWorkUpdatePeriod)
	}
}
