package hubtest

import (
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// SeriesLabelled returns, by family name, the series of the manager's
// metrics registry whose label has value.
func SeriesLabelled(label, value string) (map[string][]*dto.Metric, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	found := map[string][]*dto.Metric{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					found[f.GetName()] = append(found[f.GetName()], m)
				}
			}
		}
	}
	return found, nil
}

// CounterSum adds up the counter family's series whose label has value.
func CounterSum(g Gomega, family, label, value string) float64 {
	series, err := SeriesLabelled(label, value)
	g.Expect(err).NotTo(HaveOccurred())
	var total float64
	for _, m := range series[family] {
		total += m.GetCounter().GetValue()
	}
	return total
}

// GaugeValue is the sum of the family's gauges labelled label=value, and
// whether there is one.
func GaugeValue(g Gomega, family, label, value string) (float64, bool) {
	total, found, err := GatherGauge(family, label, value)
	g.Expect(err).NotTo(HaveOccurred())
	return total, found
}

// Gauge is the value of a per-member metric family of the in-process manager.
func Gauge(g Gomega, family, cluster string) (float64, bool) {
	series, err := SeriesLabelled("cluster", cluster)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range series[family] {
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// GatherGauge is GaugeValue for goroutines without a Gomega.
func GatherGauge(family, label, value string) (total float64, found bool, err error) {
	series, err := SeriesLabelled(label, value)
	for _, m := range series[family] {
		total += m.GetGauge().GetValue()
	}
	return total, len(series[family]) > 0, err
}
