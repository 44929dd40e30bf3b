package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A measured run (a cold start, a flood) begins once the machine's CPUs have
// been busy less than quietBusy of the time for quietSpan, or after
// sizes.maxQuiesce at the latest. Before it, the API servers may still be digesting
// the previous manager's objects (deleting thousands of Widgets and
// Deployments, compacting) or starting up, and whichever manager goes first
// in a repetition paid for it: 89.8 s against 77.5 s in one repetition of
// the cold start, 84.8 s against 99.6 s with the order reversed.
const (
	quietBusy = 0.3
	quietSpan = 3 * time.Second
)

// quiesced is one wait for the machine to settle before a measured run.
type quiesced struct {
	run     string
	waited  time.Duration
	busy    float64 // share of the CPUs busy in the last second of the wait
	settled bool
}

// quiesce waits until the machine settles (see quietBusy) before run and
// records the wait. Where /proc/stat cannot be read it does not wait.
func (b *benchmark) quiesce(ctx context.Context, run string) error {
	start := time.Now()
	last, err := readCPUTimes()
	if err != nil {
		return nil
	}
	var quietSince time.Time
	q := quiesced{run: run}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		now, err := readCPUTimes()
		if err != nil {
			return nil
		}
		q.busy = now.busySince(last)
		last = now
		switch {
		case q.busy >= quietBusy:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = time.Now()
		}
		q.settled = !quietSince.IsZero() && time.Since(quietSince) >= quietSpan
		if q.settled || time.Since(start) >= b.maxQuiesce {
			q.waited = time.Since(start)
			b.quiesced = append(b.quiesced, q)
			if !q.settled {
				logf("%s: the CPUs were still %.0f%% busy after %s; measuring anyway", run, 100*q.busy, formatDuration(q.waited))
			}
			return nil
		}
	}
}

// quiescedSummary says how long the measured runs waited for the machine to
// settle, and which began before it did.
func (b *benchmark) quiescedSummary() string {
	if len(b.quiesced) == 0 {
		return ""
	}
	waits := make([]time.Duration, 0, len(b.quiesced))
	var unsettled []string
	for _, q := range b.quiesced {
		waits = append(waits, q.waited)
		if !q.settled {
			unsettled = append(unsettled, fmt.Sprintf("%s (%.0f%% busy)", q.run, 100*q.busy))
		}
	}
	slices.Sort(waits)
	s := fmt.Sprintf("Each cold start and flood began once the CPUs had been under %.0f%% busy for %s: waits of %s to %s (median %s).",
		100*quietBusy, formatDuration(quietSpan), formatDuration(waits[0]), formatDuration(waits[len(waits)-1]), formatDuration(waits[len(waits)/2]))
	if len(unsettled) > 0 {
		s += fmt.Sprintf(" Not settled after %s, measured anyway: %s.", formatDuration(b.maxQuiesce), strings.Join(unsettled, ", "))
	}
	return s
}

// cpuTimes are the machine's CPU times from /proc/stat, in clock ticks.
type cpuTimes struct{ idle, total uint64 }

// busySince is the share of the CPUs' time since earlier that was not idle
// (iowait counts as idle).
func (c cpuTimes) busySince(earlier cpuTimes) float64 {
	total := c.total - earlier.total
	if total == 0 {
		return 0
	}
	return 1 - float64(c.idle-earlier.idle)/float64(total)
}

func readCPUTimes() (cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseCPUTimes(line)
}

// parseCPUTimes reads the aggregate "cpu" line of /proc/stat: user nice
// system idle iowait irq softirq steal (guest time is within user).
func parseCPUTimes(line string) (cpuTimes, error) {
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTimes{}, errors.New("no aggregate cpu line in /proc/stat")
	}
	var c cpuTimes
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		c.total += v
		if i == 3 || i == 4 { // idle, iowait
			c.idle += v
		}
	}
	return c, nil
}
