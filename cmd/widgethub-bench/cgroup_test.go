package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// openCPUCgroups says why it cannot make cgroups: not root, no cpu
// controller, a directory that is not a cgroup (its control files refused).
func TestOpenCPUCgroupsSaysWhyNot(t *testing.T) {
	plain := t.TempDir()
	// Looks like a controller at the top, but a directory made in it has
	// no control files: the quota write is refused.
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "cpu.cfs_quota_us"), []byte("-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, mount string
		euid        int
		want        string
		none        bool // errNoCgroups: the test of real cgroups skips
	}{
		{"not root", fake, 1000, "not running as root", true},
		{"no controller", plain, 0, "no cgroup v1 cpu controller", true},
		{"no mount", filepath.Join(plain, "missing"), 0, "no cgroup v1 cpu controller", true},
		{"write refused", fake, 0, "refused", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cg, err := openCPUCgroups(c.mount, "/", c.euid)
			if err == nil {
				t.Fatalf("made cgroups at %s: %+v", c.mount, cg)
			}
			if errors.Is(err, errNoCgroups) != c.none {
				t.Errorf("error %q: errors.Is(err, errNoCgroups) is %v, want %v", err, !c.none, c.none)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
	// The refused attempt leaves nothing behind.
	entries, err := os.ReadDir(fake)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%s holds %d entries after the refused attempt, want only cpu.cfs_quota_us", fake, len(entries))
	}
}

// Where the machine has the controller and the test runs as root, a group
// takes a quota and is removed again.
func TestCPUCgroups(t *testing.T) {
	cg, err := openCPUCgroups(cpuCgroupMount, ownCgroupPath(), os.Geteuid())
	switch {
	case errors.Is(err, errNoCgroups):
		t.Skip(err)
	case err != nil:
		t.Fatal(err) // a controller that refuses the bench's groups
	}
	defer func() {
		if err := cg.remove(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(cg.dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", cg.dir, err)
		}
	}()
	if err := cg.add("m01"); err != nil {
		t.Fatal(err)
	}
	if err := cg.setCPUs("m01", 0.5); err != nil {
		t.Fatal(err)
	}
	quota, err := os.ReadFile(filepath.Join(cg.dir, "m01", "cpu.cfs_quota_us"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(quota)), strconv.Itoa(cfsPeriod/2); got != want {
		t.Errorf("quota %s, want %s", got, want)
	}
	// The groups come before the processes outside them.
	shares, err := os.ReadFile(filepath.Join(cg.dir, "cpu.shares"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(shares)), strconv.Itoa(maxShares); got != want {
		t.Errorf("the bench's group weighs %s shares, want %s", got, want)
	}
	if err := cg.setCPUs("m01", -1); err != nil {
		t.Fatal(err)
	}

	// A process of m01 is in it only while the processes are grouped.
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	pid := sleep.Process.Pid
	in := func() string {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		return cgroupPathOf(string(raw), "cpu")
	}
	parent, m01 := in(), ownCgroupPath()+"/"+filepath.Base(cg.dir)+"/m01"
	if err := cg.add("m01", pid); err != nil {
		t.Fatal(err)
	}
	if got := in(); got != parent {
		t.Errorf("added while not grouped: in %s, want %s", got, parent)
	}
	for _, on := range []bool{true, false, true} {
		if err := cg.group(on); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: m01, false: parent}[on]
		if got := in(); filepath.Clean(got) != filepath.Clean(want) {
			t.Errorf("group(%v): in %s, want %s", on, got, want)
		}
	}
	_ = sleep.Process.Kill()
	_ = sleep.Wait()
	if err := cg.group(false); err != nil {
		t.Fatalf("a process that exited: %v", err)
	}
	if len(cg.pids["m01"]) != 0 {
		t.Errorf("the exited process is still a process of m01: %v", cg.pids["m01"])
	}
}

func TestCgroupPathOf(t *testing.T) {
	text := "4:memory:/a\n2:cpu,cpuacct:/bench/x\n1:name=systemd:/\n0::/\n"
	if got := cgroupPathOf(text, "cpu"); got != "/bench/x" {
		t.Errorf("cpu path %q, want /bench/x", got)
	}
	if got := cgroupPathOf(text, "cpuset"); got != "/" {
		t.Errorf("cpuset path %q, want /", got)
	}
}

func TestParsePlacements(t *testing.T) {
	ps, err := parseChoices("colocated, own,own", "placement", placements)
	if err != nil || len(ps) != 2 || ps[0] != colocated || ps[1] != own {
		t.Errorf("parseChoices(placements): %v, %v", ps, err)
	}
	if _, err := parseChoices("own,elsewhere", "placement", placements); err == nil {
		t.Error("parseChoices accepted the placement elsewhere")
	}
}

// Every own row has its twin's target and a title that says its placement.
func TestOwnRows(t *testing.T) {
	b := &benchmark{sizes: quickSizes()}
	titles := b.rowTitles()
	for co, o := range ownTwins {
		if targets[o] != targets[co] {
			t.Errorf("row %d's target %q, its twin's %q", o, targets[o], targets[co])
		}
		if !strings.HasSuffix(titles[o], "(members with their own CPUs)") || !strings.HasSuffix(titles[co], "(co-located members)") {
			t.Errorf("titles %q and %q do not say their placement", titles[o], titles[co])
		}
	}
}
