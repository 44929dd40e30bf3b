package main

import (
	"strings"
	"testing"
	"time"
)

func TestBusyShareFromProcStat(t *testing.T) {
	before, err := parseCPUTimes("cpu  100 10 50 800 40 0 0 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	// 100 ticks later: 30 user, 10 system, 50 idle, 10 iowait.
	after, err := parseCPUTimes("cpu  130 10 60 850 50 0 0 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if got := after.busySince(before); got < 0.399 || got > 0.401 {
		t.Errorf("busy share %v, want 0.4", got)
	}
	if got := before.busySince(before); got != 0 {
		t.Errorf("busy share over no time %v, want 0", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := parseCPUTimes(bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestQuiescedSummaryNamesUnsettledRuns(t *testing.T) {
	b := &benchmark{sizes: fullSizes(), quiesced: []quiesced{
		{run: "flood of widgethub", waited: 4 * time.Second, busy: 0.1, settled: true},
		{run: "flood of peer-tuned", waited: 90 * time.Second, busy: 0.8},
		{run: "cold start of widgethub", waited: 10 * time.Second, busy: 0.2, settled: true},
	}}
	s := b.quiescedSummary()
	for _, want := range []string{"4.0 s to 90.0 s", "under 30% busy for 3.0 s", "Not settled after 90.0 s", "median 10.0 s", "flood of peer-tuned (80% busy)"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q does not say %q", s, want)
		}
	}
	if strings.Contains(s, "flood of widgethub (") {
		t.Errorf("summary %q names a settled run", s)
	}
	if (&benchmark{}).quiescedSummary() != "" {
		t.Error("a summary without measured runs")
	}
}
