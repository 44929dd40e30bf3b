package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildDemo builds hack/demo into a temporary directory of t and returns the binary.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/demo: %v\n%s", err, out)
	}
	return bin
}

// demoCommand runs bin with args and the environment env added to this
// process's, KUBEBUILDER_ASSETS removed unless env sets it.
func demoCommand(ctx context.Context, bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBEBUILDER_ASSETS=") && !strings.HasPrefix(kv, "DEMO_EXIT_WHEN_READY=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// TestDemoReachesReadyWidgets runs `make demo` as make runs it (the built
// command, DEMO_EXIT_WHEN_READY=1 from the environment): the whole path a
// user sees, from an empty machine state to Ready Widgets listed by the
// plugin, and exit 0.
func TestDemoReachesReadyWidgets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three control planes")
	}
	bin := buildDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, stderr bytes.Buffer
	cmd := demoCommand(ctx, bin, []string{"KUBEBUILDER_ASSETS=" + os.Getenv("KUBEBUILDER_ASSETS"), "DEMO_EXIT_WHEN_READY=1"}, "--ready-timeout", "2m")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	t.Logf("demo output:\n%s\nstderr:\n%s", out.String(), stderr.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	table := out.String()[strings.Index(out.String(), "$ kubectl widgethub widgets -A"):]
	for _, m := range members {
		// The ClusterProfile's member too: the plugin reads it through the
		// access provider file, as the hub does.
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
	for _, want := range []string{"fleet.kubeconfig", "every sample Widget is Ready", "ClusterProfile widgethub-system/" + profileMember + " created"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo did not print %q", want)
		}
	}
}

// The demo's flags and environment, as README promises them: --exit-when-ready
// (off, or on with DEMO_EXIT_WHEN_READY=1), --ready-timeout (3m), and no
// start without KUBEBUILDER_ASSETS (exit 2, pointing at make demo).
func TestDemoFlagsAndEnvironment(t *testing.T) {
	bin := buildDemo(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	help := func(env ...string) string {
		out, err := demoCommand(ctx, bin, env, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("demo --help: %v\n%s", err, out)
		}
		return string(out)
	}
	usage := func(help, flag string) string {
		_, rest, found := strings.Cut(help, "  -"+flag+" ")
		if !found {
			_, rest, found = strings.Cut(help, "  -"+flag+"\n")
		}
		if !found {
			t.Fatalf("demo --help does not list -%s:\n%s", flag, help)
		}
		if i := strings.Index(rest, "\n  -"); i >= 0 {
			rest = rest[:i]
		}
		return rest
	}
	plain := help()
	if u := usage(plain, "exit-when-ready"); strings.Contains(u, "(default ") {
		t.Errorf("-exit-when-ready is on without DEMO_EXIT_WHEN_READY: %q", u)
	}
	if u := usage(help("DEMO_EXIT_WHEN_READY=1"), "exit-when-ready"); !strings.Contains(u, "(default true)") {
		t.Errorf("DEMO_EXIT_WHEN_READY=1 does not turn -exit-when-ready on: %q", u)
	}
	if u := usage(help("DEMO_EXIT_WHEN_READY=0"), "exit-when-ready"); strings.Contains(u, "(default ") {
		t.Errorf("DEMO_EXIT_WHEN_READY=0 turns -exit-when-ready on: %q", u)
	}
	if u := usage(plain, "ready-timeout"); !strings.Contains(u, "(default 3m0s)") {
		t.Errorf("-ready-timeout: %q, want the README's 3m default", u)
	}

	var stderr bytes.Buffer
	cmd := demoCommand(ctx, bin, nil, "--exit-when-ready")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "KUBEBUILDER_ASSETS is not set: run `make demo`") {
		t.Errorf("demo without KUBEBUILDER_ASSETS: %v, stderr %q; want exit 2 and a pointer to make demo", err, stderr.String())
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
