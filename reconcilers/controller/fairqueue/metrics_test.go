package fairqueue

import (
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// fakeMetrics is a workqueue.MetricsProvider that keeps the last value of each metric.
type fakeMetrics struct {
	mu     sync.Mutex
	values map[string]float64
	counts map[string]int // observations of histograms
}

type fakeMetric struct {
	p    *fakeMetrics
	name string
}

func (m fakeMetric) Inc() { m.add(1) }
func (m fakeMetric) Dec() { m.add(-1) }
func (m fakeMetric) add(v float64) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.values[m.name] += v
}
func (m fakeMetric) Set(v float64) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.values[m.name] = v
}
func (m fakeMetric) Observe(v float64) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.values[m.name] = v
	m.p.counts[m.name]++
}

func (p *fakeMetrics) get(name string) (float64, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.values[name], p.counts[name]
}

func (p *fakeMetrics) NewDepthMetric(string) workqueue.GaugeMetric  { return fakeMetric{p, "depth"} }
func (p *fakeMetrics) NewAddsMetric(string) workqueue.CounterMetric { return fakeMetric{p, "adds"} }
func (p *fakeMetrics) NewLatencyMetric(string) workqueue.HistogramMetric {
	return fakeMetric{p, "latency"}
}
func (p *fakeMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return fakeMetric{p, "work"}
}
func (p *fakeMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return fakeMetric{p, "unfinished"}
}
func (p *fakeMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return fakeMetric{p, "longest"}
}
func (p *fakeMetrics) NewRetriesMetric(string) workqueue.CounterMetric {
	return fakeMetric{p, "retries"}
}
func (p *fakeMetrics) NewUnresponsiveInFlightMetric(string) workqueue.SettableGaugeMetric {
	return fakeMetric{p, "unresponsive"}
}

var _ UnresponsiveMetricsProvider = &fakeMetrics{}

func TestMetrics(t *testing.T) {
	p := &fakeMetrics{values: map[string]float64{}, counts: map[string]int{}}
	q, clk := newTestQueueWith(t, Options{MetricsProvider: p})
	expect := func(name string, want float64, wantCount int) {
		t.Helper()
		if got, count := p.get(name); got != want || count != wantCount {
			t.Fatalf("%s = %v after %d observations, want %v after %d", name, got, count, want, wantCount)
		}
	}

	a, b := req("a", "x"), req("b", "y")
	q.Add(a)
	q.Add(b)
	q.Add(a)
	expect("adds", 2, 0)
	expect("depth", 2, 0)

	clk.SetTime(clk.Now().Add(3 * time.Second))
	expectGet(t, q, a)
	expect("depth", 1, 0)
	expect("latency", 3, 1)

	q.AddRateLimited(b)
	expect("retries", 1, 0)

	// The in-flight gauges follow the clock; the queue updates them every
	// unfinishedWorkUpdatePeriod, here directly.
	clk.Step(2 * time.Second)
	q.mu.Lock()
	q.metrics.updateUnfinishedWork()
	q.mu.Unlock()
	expect("longest", 2, 0)
	expect("unfinished", 2, 0)

	q.Done(a)
	expect("work", 2, 1)
}

func TestUnresponsiveInFlightMetric(t *testing.T) {
	p := &fakeMetrics{values: map[string]float64{}, counts: map[string]int{}}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := NewWithOptions(Options{Name: "widget", MetricsProvider: p, Clock: clk, Workers: 8, MaxInFlightPerMember: 6})
	defer q.ShutDown()
	expect := func(want float64) {
		t.Helper()
		q.mu.Lock()
		q.updateInFlightMetrics()
		q.mu.Unlock()
		if got, _ := p.get("unresponsive"); got != want {
			t.Fatalf("unresponsive = %v, want %v", got, want)
		}
	}
	for _, r := range []mcreconcile.Request{req("a", "1"), req("a", "2"), req("a", "3"), req("b", "1")} {
		q.Add(r)
	}
	expectGet(t, q, req("a", "1"))
	expectGet(t, q, req("b", "1"))
	expectGet(t, q, req("a", "2"))
	expect(3) // nothing answered yet
	q.Done(req("a", "1"))
	expect(1) // a answered; b did not
	clk.Step(DefaultStallAfter)
	expect(2) // a/2 stalled
	q.Done(req("a", "2"))
	q.Done(req("b", "1"))
	expect(0)
}
