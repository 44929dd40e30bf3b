package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemoReachesReadyWidgets runs `make demo --exit-when-ready` in-process:
// the whole path a user sees, from an empty machine state to Ready Widgets
// listed by the plugin.
func TestDemoReachesReadyWidgets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three control planes")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := run(ctx, options{out: &out, exitWhenReady: true, readyTimeout: 2 * time.Minute})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	table := out.String()[strings.Index(out.String(), "$ kubectl widgethub widgets -A"):]
	for _, m := range members {
		for _, w := range []string{"cart", "checkout"} {
			if !hasRow(table, map[int]string{0: m, 1: sampleNamespace, 2: w, 5: "True"}) {
				t.Errorf("widgets -A shows no Ready row for %s/%s in %s", sampleNamespace, w, m)
			}
		}
	}
	clusters := out.String()[strings.Index(out.String(), "$ kubectl widgethub clusters"):]
	for _, m := range members {
		if !hasRow(clusters, map[int]string{0: m, 1: "True", 2: "Engaged", 4: "2"}) {
			t.Errorf("clusters shows %s not Ready and Engaged with 2 Widgets", m)
		}
	}
	for _, want := range []string{"fleet.kubeconfig", "every sample Widget is Ready"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo did not print %q", want)
		}
	}
}

// hasRow reports whether a line of table has the cells want, by column index.
func hasRow(table string, want map[int]string) bool {
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		match := len(f) >= 7
		for i, cell := range want {
			match = match && i < len(f) && f[i] == cell
		}
		if match {
			return true
		}
	}
	return false
}
