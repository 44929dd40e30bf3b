package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// Linux everywhere).
const clockTicks = 100

// fleetCPU is what the fleet's processes have used of the CPUs: every
// kube-apiserver's and every etcd's CPU time, and how many times their
// threads were put on a CPU (runs): a process that serves its requests a
// few at a time wakes, and is scheduled, for each few.
type fleetCPU struct {
	apiservers, etcds       time.Duration
	apiserverRuns, etcdRuns int64
}

func readFleetCPU() (fleetCPU, error) {
	use, err := processCPU("kube-apiserver", "etcd")
	apiservers, etcds := use["kube-apiserver"], use["etcd"]
	return fleetCPU{apiservers: apiservers.cpu, etcds: etcds.cpu, apiserverRuns: apiservers.runs, etcdRuns: etcds.runs}, err
}

func (c fleetCPU) sub(before fleetCPU) fleetCPU {
	return fleetCPU{apiservers: c.apiservers - before.apiservers, etcds: c.etcds - before.etcds,
		apiserverRuns: c.apiserverRuns - before.apiserverRuns, etcdRuns: c.etcdRuns - before.etcdRuns}
}

func (c fleetCPU) total() time.Duration { return c.apiservers + c.etcds }

// processUse is what the running processes of one command name have used so
// far: CPU time (user and system), and the times their threads were put on
// a CPU (the third field of each thread's /proc/<pid>/task/<tid>/schedstat;
// zero where the kernel keeps no such count).
type processUse struct {
	cpu  time.Duration
	runs int64
}

// processCPU returns, for each of names, what the running processes of that
// command name have used so far, from one pass over /proc. The fleet's API
// servers and etcds share the machine's CPUs with the manager, so what they
// use over a run tells where its time went.
func processCPU(names ...string) (map[string]processUse, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	total := make(map[string]processUse, len(names))
	for _, path := range stats {
		comm, cpu, err := readProcStat(path)
		var unread *fs.PathError
		if errors.As(err, &unread) {
			continue // the process has exited
		}
		if err != nil {
			return nil, err
		}
		if slices.Contains(names, comm) {
			use := total[comm]
			use.cpu += cpu
			use.runs += threadRuns(filepath.Dir(path))
			total[comm] = use
		}
	}
	return total, nil
}

// threadRuns sums the times the threads of the process at dir (/proc/<pid>)
// were put on a CPU. Threads that exit meanwhile, or a kernel without the
// count, count nothing.
func threadRuns(dir string) int64 {
	stats, _ := filepath.Glob(filepath.Join(dir, "task", "[0-9]*", "schedstat"))
	var runs int64
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		runs += parseSchedstatRuns(raw)
	}
	return runs
}

// parseSchedstatRuns is the third field of a schedstat line (time on a CPU,
// time waiting for one, times run), or zero when it has none.
func parseSchedstatRuns(raw []byte) int64 {
	fields := strings.Fields(string(raw))
	if len(fields) < 3 {
		return 0
	}
	n, _ := strconv.ParseInt(fields[2], 10, 64)
	return n
}

// readProcStat returns the command name and CPU time of the process whose
// /proc/<pid>/stat is path; an *fs.PathError when it cannot be read.
func readProcStat(path string) (comm string, cpu time.Duration, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	if comm, cpu, err = parseProcStat(raw); err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	return comm, cpu, nil
}

// parseProcStat returns the command name and the CPU time (utime + stime) of
// one /proc/<pid>/stat.
func parseProcStat(raw []byte) (comm string, cpu time.Duration, err error) {
	open, closing := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || closing < open {
		return "", 0, fmt.Errorf("no command name in %q", raw)
	}
	// After the name: state (field 3) ... utime (14) and stime (15).
	fields := strings.Fields(string(raw[closing+1:]))
	if len(fields) < 13 {
		return "", 0, fmt.Errorf("too few fields in %q", raw)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return "", 0, err
		}
		ticks += n
	}
	return string(raw[open+1 : closing]), time.Duration(ticks) * time.Second / clockTicks, nil
}
