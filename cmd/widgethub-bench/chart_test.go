package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChartShowsEveryManagerAndTheTarget(t *testing.T) {
	start := time.Now()
	changed := func(at, took time.Duration) change {
		c := change{at: start.Add(at)}
		if took > 0 {
			c.reconciled = c.at.Add(took)
		}
		return c
	}
	fast := &floodResult{start: start, end: start.Add(30 * time.Second),
		changes: []change{changed(time.Second, 20*time.Millisecond), changed(2*time.Second, 60*time.Millisecond)}}
	slow := &floodResult{start: start, end: start.Add(90 * time.Second),
		changes: []change{changed(time.Second, 4*time.Second), changed(80*time.Second, 0)}}
	traces := []floodTrace{traceOf(widgethub, fast, fast.end), traceOf(peerTuned, slow, slow.end)}
	if got := traces[1].points[1]; !got.unfinished || got.latency != 10*time.Second {
		t.Fatalf("a change still waiting at the window's end: got %+v, want unfinished with 10s", got)
	}

	path := filepath.Join(t.TempDir(), "fairness.svg")
	if err := writeChart(path, traces, 5000); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "widgethub (1 floods, drained in 30.0 s)", "peer-tuned (1 floods, drained in 90.0 s)",
		"peer-tuned: still waiting", "p99 target, 100 ms", "5000 Widgets"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
}
