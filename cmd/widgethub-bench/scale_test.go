package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/widgethub/widgethub/cmd/widgethub/app"
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

// The stalest lastProbeTime is the longest a member went between status
// writes, counted from the second its lastProbeTime shows, in the window or
// up to its end; failed writes, writes before the window's end of other
// resources or members, and a member never written are told apart.
func TestStalestProbeCatchesEveryMemberAtItsOldest(t *testing.T) {
	const ns = "widgethub-system"
	b := &benchmark{opts: app.Options{RegistrationNamespace: ns}}
	at := func(s float64) time.Time {
		return time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
	}
	status := func(name string, s float64, code int) fleet.Write {
		return fleet.Write{Resource: "memberclusters/status", Namespace: ns, Name: name, Received: at(s), Code: code}
	}
	writes := []fleet.Write{
		// a: written at 0.6 (shows 0), then at 63.2: 63.2 s old at most.
		status("a", 0.6, 200), status("a", 63.2, 200),
		// b: a failed write does not refresh it; written at 5.9 (shows 5),
		// not again before the end at 70: 65 s old then.
		status("b", 5.9, 200), status("b", 40, 409),
		{Resource: "memberclusters", Namespace: ns, Name: "b", Received: at(50), Code: 200},
		{Resource: "memberclusters/status", Namespace: "other", Name: "b", Received: at(50), Code: 200},
		// c: written often, and once after the end.
		status("c", 10, 201), status("c", 30, 200), status("c", 69, 200), status("c", 71, 200),
	}
	from, to := at(5), at(70)
	got, err := b.stalestProbe(writes, []string{"a", "b", "c"}, from, to)
	if err != nil || got != 65*time.Second {
		t.Errorf("stalestProbe = %s, %v; want 65s (b at the end)", got, err)
	}
	if got, _ := b.stalestProbe(writes, []string{"a", "c"}, from, to); got != 63200*time.Millisecond {
		t.Errorf("stalestProbe of a and c = %s, want 63.2s (a before its write at 63.2)", got)
	}
	if _, err := b.stalestProbe(writes, []string{"a", "d"}, from, to); err == nil || !strings.Contains(err.Error(), "MemberCluster d") {
		t.Errorf("stalestProbe with a member never written: %v, want an error naming it", err)
	}
}
