package main

import (
	"fmt"
	"slices"
	"time"
)

// Sample is one measured duration. An Unfinished sample did not finish when
// the measurement window closed: its Value is a lower bound.
type Sample struct {
	Value      time.Duration
	Unfinished bool
}

// Quantile is a percentile of samples. When it falls among unfinished
// samples its value is a lower bound: AtLeast is set.
type Quantile struct {
	Value   time.Duration
	AtLeast bool
}

func (q Quantile) String() string {
	if q.AtLeast {
		return ">" + FormatDuration(q.Value)
	}
	return FormatDuration(q.Value)
}

// Percentile returns the p-th percentile (0 < p <= 100) of samples by the
// nearest-rank method, and false when there are none. Unfinished samples rank
// above every finished one; a percentile that falls among them is reported as
// at least the smallest of their lower bounds, which every one of them exceeds.
func Percentile(samples []Sample, p float64) (Quantile, bool) {
	if len(samples) == 0 {
		return Quantile{}, false
	}
	var finished []time.Duration
	var minUnfinished time.Duration = -1
	for _, s := range samples {
		switch {
		case !s.Unfinished:
			finished = append(finished, s.Value)
		case minUnfinished < 0 || s.Value < minUnfinished:
			minUnfinished = s.Value
		}
	}
	slices.Sort(finished)
	rank := int(float64(len(samples))*p/100+0.999999) - 1
	rank = max(0, min(rank, len(samples)-1))
	if rank < len(finished) {
		return Quantile{Value: finished[rank]}, true
	}
	return Quantile{Value: minUnfinished, AtLeast: true}, true
}

// Max returns the largest sample (a lower bound if any sample is unfinished).
func Max(samples []Sample) (Quantile, bool) { return Percentile(samples, 100) }

// FormatDuration prints d with a precision that suits its size.
func FormatDuration(d time.Duration) string {
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
