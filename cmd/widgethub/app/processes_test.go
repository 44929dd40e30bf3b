package app_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/widgethub/widgethub/internal/fleet"
)

// The tests that run the manager as a process of its own (its flags, its
// metrics and probe servers, failover) build it once per test binary.

// buildManager returns the manager binary, built once (fleet.ManagerBinary).
func buildManager(t *testing.T) string {
	t.Helper()
	bin, err := fleet.ManagerBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// managerProcess is a widgethub process of the test; its log is a file.
type managerProcess struct {
	*fleet.Process
	name string
}

// startManagerProcess starts bin with args; the test's cleanup kills it.
func startManagerProcess(t *testing.T, bin, dir, name string, args []string) *managerProcess {
	t.Helper()
	proc, err := fleet.StartProcess(bin, filepath.Join(dir, name+".log"), args...)
	if err != nil {
		t.Fatalf("start manager %s: %v", name, err)
	}
	p := &managerProcess{Process: proc, name: name}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("log of manager %s (pid %d, %v):\n%s", name, p.Pid(), p.Err(), lastLines(p.Log(), 40))
		}
	})
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
