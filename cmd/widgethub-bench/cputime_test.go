package main

import (
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis, as the kernel writes it.
	raw := []byte("4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 9 0 0 0 250 130 7 3 20 0 12 0 100 0 0\n")
	comm, cpu, err := parseProcStat(raw)
	if err != nil {
		t.Fatal(err)
	}
	if comm != "kube (api) server" || cpu != 3800*time.Millisecond {
		t.Fatalf("got %q %s, want \"kube (api) server\" 3.8s", comm, cpu)
	}
	if _, _, err := parseProcStat([]byte("4242 (etcd) S 1")); err == nil {
		t.Fatal("a truncated stat line was accepted")
	}
}

func TestProcessCPUOfThisTest(t *testing.T) {
	// Busy until this process has used some CPU by its own account, however
	// loaded the machine; processCPU counts it among the processes of its name.
	var comm string
	var own time.Duration
	for own < 100*time.Millisecond {
		var err error
		if comm, own, err = readProcStat("/proc/self/stat"); err != nil {
			t.Fatal(err)
		}
	}
	cpu, err := processCPU(comm)
	if err != nil {
		t.Fatal(err)
	}
	if cpu[comm].cpu < own {
		t.Fatalf("processes named %q used %s of CPU, less than this one's own %s", comm, cpu[comm].cpu, own)
	}
	if cpu[comm].runs == 0 {
		t.Fatalf("the threads of processes named %q were never counted on a CPU", comm)
	}
}

func TestParseSchedstatRuns(t *testing.T) {
	if n := parseSchedstatRuns([]byte("0 17047 31\n")); n != 31 {
		t.Fatalf("got %d runs, want 31", n)
	}
	if n := parseSchedstatRuns([]byte("0 17047\n")); n != 0 {
		t.Fatalf("got %d runs from a short line, want 0", n)
	}
}
