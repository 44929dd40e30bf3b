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

// fleetCPU is the CPU time the fleet's processes have used: every
// kube-apiserver's and every etcd's.
type fleetCPU struct{ apiservers, etcds time.Duration }

func readFleetCPU() (fleetCPU, error) {
	cpu, err := processCPU("kube-apiserver", "etcd")
	return fleetCPU{apiservers: cpu["kube-apiserver"], etcds: cpu["etcd"]}, err
}

func (c fleetCPU) sub(before fleetCPU) fleetCPU {
	return fleetCPU{apiservers: c.apiservers - before.apiservers, etcds: c.etcds - before.etcds}
}

func (c fleetCPU) total() time.Duration { return c.apiservers + c.etcds }

// processCPU returns, for each of names, the CPU time (user and system) the
// running processes of that command name have used so far, from one pass
// over /proc. The fleet's API servers and etcds share the machine's CPUs
// with the manager, so what they use over a run tells where its time went.
func processCPU(names ...string) (map[string]time.Duration, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	total := make(map[string]time.Duration, len(names))
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
			total[comm] += cpu
		}
	}
	return total, nil
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
