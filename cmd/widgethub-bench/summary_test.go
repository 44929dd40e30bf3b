package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	done := func(ns ...int) []sample {
		s := make([]sample, len(ns))
		for i, n := range ns {
			s[i] = sample{value: ms(n)}
		}
		return s
	}
	unfinished := func(n int) sample { return sample{value: ms(n), unfinished: true} }
	tests := []struct {
		name    string
		samples []sample
		p       float64
		want    quantile
	}{
		{"median of odd", done(30, 10, 20), 50, quantile{value: ms(20)}},
		{"median of even is the lower", done(40, 10, 30, 20), 50, quantile{value: ms(20)}},
		{"p99 of 100 is the 99th", done(seq(100)...), 99, quantile{value: ms(99)}},
		{"max", done(5, 7, 6), 100, quantile{value: ms(7)}},
		{"among finished", append(done(10, 20, 30), unfinished(5000)), 50, quantile{value: ms(20)}},
		{"among unfinished is their least lower bound", append(done(10), unfinished(9000), unfinished(4000)), 50, quantile{value: ms(4000), atLeast: true}},
		{"unfinished rank above a larger finished one", append(done(8000), unfinished(100)), 100, quantile{value: ms(100), atLeast: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := percentile(tc.samples, tc.p)
			if !ok || got != tc.want {
				t.Fatalf("Percentile(p%v) = %v (%v), want %v", tc.p, got, ok, tc.want)
			}
		})
	}
	if _, ok := percentile(nil, 50); ok {
		t.Fatal("a percentile of no samples")
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

func TestCountWrites(t *testing.T) {
	metrics := []byte(`# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="widgethub.io",resource="widgets",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 41
apiserver_request_total{code="201",component="apiserver",dry_run="",group="widgethub.io",resource="widgets",scope="resource",subresource="",verb="POST",version="v1alpha1"} 100
apiserver_request_total{code="200",component="apiserver",dry_run="",group="widgethub.io",resource="widgets",scope="resource",subresource="",verb="LIST",version="v1alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="GET",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="WATCH",version="v1"} 9
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 80
apiserver_request_total_other{verb="POST"} 1000
`)
	got, err := countWrites(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if want := (writeCounts{controller: 83, all: 266, lists: 7, gets: 5}); got != want {
		t.Fatalf("countWrites = %+v, want %+v", got, want)
	}
}

func TestCellIsTheMedianRepetitionWithItsSpread(t *testing.T) {
	var tb table
	tb.init([]string{widgethub, peerTuned})
	for _, d := range []int{300, 100, 200} {
		ms := time.Duration(d) * time.Millisecond
		tb.add(rowConverge, widgethub, "took "+formatDuration(ms), durationKey(ms), d < 250)
	}
	text, met := tb.cell(rowConverge, widgethub)
	if want := "took " + formatDuration(200*time.Millisecond) + " [median of 3; " + formatDuration(100*time.Millisecond) + "-" + formatDuration(300*time.Millisecond) + "]"; text != want {
		t.Errorf("cell = %q, want %q", text, want)
	}
	if met {
		t.Error("met although one repetition missed the target")
	}
	tb.add(rowConverge, peerTuned, "once", durationKey(time.Second), true)
	if text, met := tb.cell(rowConverge, peerTuned); text != "once" || !met {
		t.Errorf("one repetition: cell = %q, %v; want its text alone, met", text, met)
	}
	if text, _ := tb.cell(rowEngage, widgethub); text != "" {
		t.Errorf("a row without results: %q", text)
	}
}

func TestRotateStartsEachRepetitionWithAnotherManager(t *testing.T) {
	impls := []string{widgethub, peer, peerTuned}
	firsts := map[string]bool{}
	for rep := range 3 {
		order := rotate(impls, rep)
		if len(order) != 3 {
			t.Fatalf("rotate(%d) = %v", rep, order)
		}
		firsts[order[0]] = true
	}
	if len(firsts) != 3 {
		t.Errorf("three repetitions started with %v, want each manager once", firsts)
	}
	if got := rotate(impls, 0); got[0] != widgethub || got[2] != peerTuned {
		t.Errorf("rotate(0) = %v, want the order given", got)
	}
}

func TestPeerIsMeasuredInTheFirstRepetitionOnly(t *testing.T) {
	impls := []string{widgethub, peer, peerTuned}
	if got := repetitionOrder(impls, 0); !slices.Equal(got, impls) {
		t.Errorf("repetition 1 measures %v, want %v", got, impls)
	}
	firsts := map[string]int{}
	for rep := 1; rep < 3; rep++ {
		order := repetitionOrder(impls, rep)
		if !slices.Equal(slices.Sorted(slices.Values(order)), []string{peerTuned, widgethub}) {
			t.Errorf("repetition %d measures %v, want widgethub and peer-tuned", rep+1, order)
		}
		firsts[order[0]]++
	}
	if firsts[widgethub] != 1 || firsts[peerTuned] != 1 {
		t.Errorf("repetitions 2 and 3 started with %v, want each of widgethub and peer-tuned once", firsts)
	}
	if got := repetitionOrder([]string{peer}, 1); len(got) != 0 {
		t.Errorf("-managers peer, repetition 2 measures %v, want none", got)
	}
}

func TestFitLine(t *testing.T) {
	// Two measurements without members scatter around 10; the line through
	// their mean and the others is 10 + 2x.
	base, per := fitLine([]point{{0, 9}, {100, 210}, {0, 11}, {300, 610}})
	if math.Abs(per-2) > 1e-9 || math.Abs(base-10) > 1e-9 {
		t.Errorf("fitLine = %.3f + %.3f x, want 10 + 2 x", base, per)
	}
	if base, per := fitLine([]point{{5, 7}}); per != 0 || base != 7 {
		t.Errorf("one point: %.2f + %.2f x, want 7 + 0 x", base, per)
	}
}

func TestMissedListsTheRowsWidgethubMissedInAnyRepetition(t *testing.T) {
	b := &benchmark{}
	b.table.init([]string{widgethub, peerTuned})
	b.table.add(rowEngage, widgethub, "fast", durationKey(time.Millisecond), true)
	b.table.add(rowConverge, widgethub, "first", durationKey(time.Second), true)
	b.table.add(rowConverge, widgethub, "second", durationKey(2*time.Second), false)
	b.table.add(rowMemoryPerMember, peerTuned, "the peer alone is not judged", bytesKey(1), false)
	b.table.add(rowQuietBaseline, widgethub, "a row without a target", durationKey(time.Second), false)
	missed := b.missed()
	if len(missed) != 1 || missed[0] != b.rowTitles()[rowConverge] {
		t.Fatalf("missed = %q, want only the cold start's title", missed)
	}
}

func TestFairEnoughNeedsUnder100msAndTwiceThePatchCall(t *testing.T) {
	ms := func(n int) quantile { return quantile{value: time.Duration(n) * time.Millisecond} }
	tests := []struct {
		p99, patch quantile
		want       bool
	}{
		{ms(40), ms(23), true},
		{ms(46), ms(23), true},
		{ms(47), ms(23), false},
		{ms(100), ms(60), false},
		{quantile{value: 10 * time.Millisecond, atLeast: true}, ms(23), false},
	}
	for _, tc := range tests {
		if got := fairEnough(tc.p99, tc.patch); got != tc.want {
			t.Errorf("fairEnough(%v, %v) = %v, want %v", tc.p99, tc.patch, got, tc.want)
		}
	}
}
