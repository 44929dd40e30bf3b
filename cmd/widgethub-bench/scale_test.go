package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/widgethub/widgethub/internal/fleet"
)

func TestHubWriteKind(t *testing.T) {
	const ns = "widgethub-system"
	for _, tc := range []struct {
		write fleet.Write
		want  string
	}{
		{fleet.Write{Resource: "leases", Namespace: ns, Name: "widgethub-replica-replica-1"}, "heartbeats"},
		{fleet.Write{Resource: "leases", Namespace: ns, Name: "widgethub-member-scale-7"}, "fences"},
		{fleet.Write{Resource: "leases", Namespace: ns, Name: "widgethub-fence-0123abcd"}, "fences"},
		{fleet.Write{Resource: "memberclusters/status", Namespace: ns, Name: "scale-7"}, "MemberCluster status"},
		{fleet.Write{Resource: "memberclusters", Namespace: ns, Name: "scale-7"}, "other"},
		{fleet.Write{Resource: "events", Namespace: ns}, "other"},
		{fleet.Write{Resource: "leases", Namespace: "kube-system", Name: "kube-apiserver-abc"}, ""},
	} {
		if got := hubWriteKind(tc.write, ns); got != tc.want {
			t.Errorf("hubWriteKind(%s %s/%s) = %q, want %q", tc.write.Resource, tc.write.Namespace, tc.write.Name, got, tc.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("250, 1000")
	if err != nil || len(got) != 2 || got[0] != 250 || got[1] != 1000 {
		t.Errorf("parseSizes(250, 1000) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "ten", "100,"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

func TestScaleRunFitsTheCostPerMemberServed(t *testing.T) {
	const mb = 1 << 20
	r := scaleRun{shardResult: shardResult{owned: []int{100, 300},
		heap0: []int64{10 * mb, 10 * mb}, heap: []int64{110 * mb, 310 * mb},
		rss0: []int64{50 * mb, 50 * mb}, rss: []int64{150 * mb, 350 * mb}}}
	heapBase, heapPer, rssBase, rssPer := r.perMember()
	if heapBase != 10*mb || heapPer != mb || rssBase != 50*mb || rssPer != mb {
		t.Errorf("perMember = %.0f + %.0f, %.0f + %.0f; want 10 MiB + 1 MiB, 50 MiB + 1 MiB", heapBase, heapPer, rssBase, rssPer)
	}
	r.rest, r.writes = 10*time.Second, map[string]int{"heartbeats": 50, "MemberCluster status": 150}
	if got := r.writesPerSecond(); got != 20 {
		t.Errorf("writesPerSecond = %g, want 20", got)
	}
	if text := r.restText(); !strings.Contains(text, "heartbeats 5.00/s") || !strings.Contains(text, "fences 0.00/s") {
		t.Errorf("restText lacks a kind: %s", text)
	}
}

func TestScaleChartsShowEveryRun(t *testing.T) {
	const mb = 1 << 20
	run := scaleRun{members: 1000, shardResult: shardResult{replicas: 5, owned: []int{200, 200},
		heap0: []int64{8 * mb, 9 * mb}, heap: []int64{180 * mb, 190 * mb}},
		takeover: takeover{replica: "replica-5", members: 200, allServed: 12 * time.Second, reconciled: 13 * time.Second,
			timeline: []servedAt{{time.Second, 0}, {11 * time.Second, 40}, {12 * time.Second, 200}}}}
	dir := t.TempDir()
	heap, takeover := filepath.Join(dir, "heap.svg"), filepath.Join(dir, "takeover.svg")
	if err := writeHeapChart(heap, []scaleRun{run}); err != nil {
		t.Fatal(err)
	}
	if err := writeTakeoverChart(takeover, []scaleRun{run}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for path, wants := range map[string][]string{
		heap:     {"<svg", "1000 members on 5 replicas", "per member"},
		takeover: {"<svg", "200 of replica-5, all served after 12.0 s", "Widget change reconciled", "lease duration, 10.0 s"},
	} {
		svg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(svg), want) {
				t.Errorf("%s lacks %q", filepath.Base(path), want)
			}
		}
	}
}

func TestParseChoicesOfScenarios(t *testing.T) {
	got, err := parseChoices("scale, engage,scale", "scenario", scenarios)
	if err != nil || !slices.Equal(got, []string{"scale", "engage"}) {
		t.Errorf("parseChoices(scale, engage,scale) = %v, %v", got, err)
	}
	if got, err := parseChoices(strings.Join(scenarios, ","), "scenario", scenarios); err != nil || !slices.Equal(got, scenarios) {
		t.Errorf("parseChoices(every scenario) = %v, %v", got, err)
	}
	for _, bad := range []string{"scale,flood", "", "engage,"} {
		if _, err := parseChoices(bad, "scenario", scenarios); err == nil {
			t.Errorf("parseChoices(%q) accepted", bad)
		}
	}
}
