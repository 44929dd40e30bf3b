package main

import (
	"fmt"
	"slices"
	"time"
)

// sample is one measured duration. An unfinished sample did not finish when
// the measurement window closed: its value is a lower bound.
type sample struct {
	value      time.Duration
	unfinished bool
}

// quantile is a percentile of samples. When it falls among unfinished
// samples its value is a lower bound: atLeast is set.
type quantile struct {
	value   time.Duration
	atLeast bool
}

func (q quantile) String() string {
	if q.atLeast {
		return ">" + formatDuration(q.value)
	}
	return formatDuration(q.value)
}

// percentile returns the p-th percentile (0 < p <= 100) of samples by the
// nearest-rank method, and false when there are none. Unfinished samples rank
// above every finished one; a percentile that falls among them is reported as
// at least the smallest of their lower bounds, which every one of them exceeds.
func percentile(samples []sample, p float64) (quantile, bool) {
	if len(samples) == 0 {
		return quantile{}, false
	}
	var finished []time.Duration
	var minUnfinished time.Duration = -1
	for _, s := range samples {
		switch {
		case !s.unfinished:
			finished = append(finished, s.value)
		case minUnfinished < 0 || s.value < minUnfinished:
			minUnfinished = s.value
		}
	}
	slices.Sort(finished)
	rank := int(float64(len(samples))*p/100+0.999999) - 1
	rank = max(0, min(rank, len(samples)-1))
	if rank < len(finished) {
		return quantile{value: finished[rank]}, true
	}
	return quantile{value: minUnfinished, atLeast: true}, true
}

// p50p99 are the median and the 99th percentile of samples (zero when there are none).
func p50p99(samples []sample) (p50, p99 quantile) {
	p50, _ = percentile(samples, 50)
	p99, _ = percentile(samples, 99)
	return p50, p99
}

// formatDuration prints d with a precision that suits its size.
func formatDuration(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 100*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	default:
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
}
