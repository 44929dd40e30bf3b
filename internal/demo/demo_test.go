package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/widgethub/widgethub/internal/demo"
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
	err := demo.Run(ctx, demo.Options{Out: &out, ExitWhenReady: true, ReadyTimeout: 2 * time.Minute})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	table := out.String()[strings.Index(out.String(), "$ kubectl widgethub widgets -A"):]
	for _, m := range demo.Members {
		for _, w := range []string{"cart", "checkout"} {
			if !containsRow(table, m, demo.SampleNamespace, w, "True") {
				t.Errorf("widgets -A shows no Ready row for %s/%s in %s", demo.SampleNamespace, w, m)
			}
		}
	}
	clusters := out.String()[strings.Index(out.String(), "$ kubectl widgethub clusters"):]
	for _, m := range demo.Members {
		if !containsMember(clusters, m, "True", "Engaged", "2") {
			t.Errorf("clusters shows %s not Ready and Engaged with 2 Widgets", m)
		}
	}
	for _, want := range []string{"fleet.kubeconfig", "every sample Widget is Ready"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo did not print %q", want)
		}
	}
}

// containsRow reports whether a line of table starts with cluster, namespace
// and name and has a READY cell equal to ready.
func containsRow(table, cluster, namespace, name, ready string) bool {
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) >= 7 && f[0] == cluster && f[1] == namespace && f[2] == name && f[5] == ready {
			return true
		}
	}
	return false
}

// containsMember reports whether a line of the clusters table shows name with
// the given READY, REASON and WIDGETS cells.
func containsMember(table, name, ready, reason, widgets string) bool {
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) >= 7 && f[0] == name && f[1] == ready && f[2] == reason && f[4] == widgets {
			return true
		}
	}
	return false
}
