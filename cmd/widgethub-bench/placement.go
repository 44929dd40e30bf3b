package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/widgethub/widgethub/internal/fleet"
)

// placement says where the members' API servers and etcds run while a row
// is measured.
type placement string

const (
	// own: each member's kube-apiserver and etcd under a CPU budget of their
	// own, as on a fleet where every member has its own machines; the hub's
	// API server, etcd and the manager under the hub's budget.
	own placement = "own"
	// colocated: every process shares the machine's CPUs.
	colocated placement = "colocated"
)

var placements = []placement{own, colocated}

// ownTwins are the rows measured in both placements: the co-located row and
// its twin with members of their own capacity.
var ownTwins = map[int]int{
	rowQuietBaseline: rowQuietBaselineOwn,
	rowFairness:      rowFairnessOwn,
	rowQuietSplit:    rowQuietSplitOwn,
	rowDrain:         rowDrainOwn,
	rowFairnessLarge: rowFairnessLargeOwn,
	rowDrainLarge:    rowDrainLargeOwn,
	rowThroughput:    rowThroughputOwn,
	rowServerWrites:  rowServerWritesOwn,
	rowCeiling:       rowCeilingOwn,
	rowConverge:      rowConvergeOwn,
	rowConvergeOne:   rowConvergeOneOwn,
}

// An own row has the target of its co-located twin.
func init() {
	for co, o := range ownTwins {
		targets[o] = targets[co]
	}
}

// placedTitles labels the rows measured in both placements.
func placedTitles(titles [rowCount]string) [rowCount]string {
	for co, o := range ownTwins {
		titles[o] = titles[co] + " (members with their own CPUs)"
		titles[co] += " (co-located members)"
	}
	return titles
}

// row is r of the placement being measured.
func (b *benchmark) row(r int) int {
	if o, ok := ownTwins[r]; ok && b.placement == own {
		return o
	}
	return r
}

// ceilings are the API server ceilings of the placement being measured.
func (b *benchmark) ceilings() *[][2]float64 {
	if b.placement == own {
		return &b.ownCeiling
	}
	return &b.ceiling
}

// openCgroups makes the cgroups of the own placement when it is asked for.
// Where it cannot, it says why once and leaves the placement out.
func (b *benchmark) openCgroups() {
	if !slices.Contains(b.placements, own) {
		return
	}
	var err error
	if rest := float64(runtime.NumCPU()) - b.hubCPUs; b.hubCPUs <= 0 || rest <= 0 {
		err = fmt.Errorf("-hub-cpus %g leaves no CPU for the members of a %d-CPU machine", b.hubCPUs, runtime.NumCPU())
	} else {
		b.cgroups, err = openCPUCgroups(cpuCgroupMount, ownCgroupPath(), os.Geteuid())
	}
	if err != nil {
		b.leaveOutOwn(err)
	}
}

// leaveOutOwn gives up the own placement for the rest of the run.
func (b *benchmark) leaveOutOwn(err error) {
	b.ownMissing = err.Error()
	b.placements = slices.DeleteFunc(b.placements, func(p placement) bool { return p == own })
	logf("%s", b.ownMissingLine())
}

func (b *benchmark) ownMissingLine() string {
	return "Rows with members of their own CPUs left out: " + b.ownMissing
}

// putInCgroup moves the kube-apiserver and etcd of cp into a cgroup of
// their own, named after cp; if that fails, the own placement is left out.
func (b *benchmark) putInCgroup(cp *fleet.ControlPlane) {
	if b.cgroups == nil {
		return
	}
	plane := cp.Env.ControlPlane
	pids, err := processesWithArg("--cert-dir="+plane.APIServer.CertDir, "--data-dir="+plane.Etcd.DataDir)
	if err == nil && len(pids) != 2 {
		err = fmt.Errorf("found %d processes of %s's kube-apiserver and etcd, not 2", len(pids), cp.Name)
	}
	if err == nil {
		err = b.cgroups.add(cp.Name, pids...)
	}
	if err != nil {
		b.closeCgroups()
		b.leaveOutOwn(err)
	}
}

// putManagerInCgroup moves a manager process into the hub's cgroup.
func (b *benchmark) putManagerInCgroup(pid int) error {
	if b.cgroups == nil {
		return nil
	}
	return b.cgroups.add(b.fleet.Hub.Name, pid)
}

// place sets the CPU budgets of placement p for row (the co-located row's
// number; -1 for none), which uses members (see budget).
func (b *benchmark) place(p placement, members []member, row int) error {
	b.placement, b.placedRow, b.placedMembers = p, b.row(row), members
	if p == own && b.cgroups != nil {
		logf("members with their own CPUs: hub %g CPUs, %d member(s) %.2f CPUs each", b.hubCPUs, len(members), b.memberShare(members))
	}
	return b.budget(p, members)
}

// budget sets the CPU budgets of placement p: own moves the processes into
// their groups and gives the hub hubCPUs and each of members an equal share
// of the machine's other CPUs; colocated removes every budget and moves the
// processes out of the groups. Work a scenario does not measure runs
// without them (see liftBudgets).
func (b *benchmark) budget(p placement, members []member) error {
	if b.cgroups == nil {
		return nil
	}
	if err := b.cgroups.group(p == own); err != nil {
		return err
	}
	hubCPUs := -1.0
	if p == own {
		hubCPUs = b.hubCPUs
	}
	if err := b.cgroups.setCPUs(b.fleet.Hub.Name, hubCPUs); err != nil {
		return err
	}
	for _, m := range b.members {
		cpus := -1.0
		if p == own && slices.ContainsFunc(members, func(u member) bool { return u.Name == m.Name }) {
			cpus = b.memberShare(members)
		}
		if err := b.cgroups.setCPUs(m.Name, cpus); err != nil {
			return err
		}
	}
	return nil
}

// liftBudgets removes the placement's budgets for work a scenario does not
// measure (making or deleting Widgets, engaging members): thousands of
// Widgets on half a CPU or less take minutes. setBudgets sets them again.
func (b *benchmark) liftBudgets() error { return b.budget(colocated, nil) }

// setBudgets sets the budgets of the placement and members being measured.
func (b *benchmark) setBudgets() error { return b.budget(b.placement, b.placedMembers) }

// unbudgeted runs work without the placement's budgets, and sets them again
// after it.
func (b *benchmark) unbudgeted(work func() error) error {
	if err := b.liftBudgets(); err != nil {
		return err
	}
	return errors.Join(work(), b.setBudgets())
}

// memberShare is each of members' CPUs in the own placement.
func (b *benchmark) memberShare(members []member) float64 {
	return (float64(runtime.NumCPU()) - b.hubCPUs) / float64(max(1, len(members)))
}

// ownPeerMargin is how much longer than widgethub's time on an own row
// (the longest so far) the tuned peer is measured there.
const ownPeerMargin = 1.25

// ownPeerWindow is how long the tuned peer is measured on the own row being
// measured: -own-peer-window, or longer once widgethub took longer, so that
// the peer's time decides the target whenever it is widgethub's or less.
func (b *benchmark) ownPeerWindowFor() time.Duration {
	took := b.widgethubTook[b.placedRow]
	return max(b.ownPeerWindow, time.Duration(float64(took)*ownPeerMargin).Round(time.Second))
}

// noteWidgethub records widgethub's time on the own row being measured.
func (b *benchmark) noteWidgethub(impl string, took time.Duration) {
	if impl != widgethub || b.placement != own {
		return
	}
	if b.widgethubTook == nil {
		b.widgethubTook = map[int]time.Duration{}
	}
	b.widgethubTook[b.placedRow] = max(b.widgethubTook[b.placedRow], took)
}

// logThrottled logs, for each group, how often it was throttled so far.
func (b *benchmark) logThrottled() {
	if b.cgroups == nil {
		return
	}
	var stats []string
	for _, name := range b.cgroups.groups {
		periods, throttled, ns, err := b.cgroups.throttled(name)
		if err != nil {
			stats = append(stats, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		stats = append(stats, fmt.Sprintf("%s %d/%d periods throttled (%.1fs)", name, throttled, periods, float64(ns)/1e9))
	}
	logf("cgroups so far: %s", strings.Join(stats, ", "))
}

// closeCgroups removes the cgroups, if any.
func (b *benchmark) closeCgroups() {
	if b.cgroups == nil {
		return
	}
	if err := b.cgroups.remove(); err != nil {
		logf("%v", err)
	}
	b.cgroups = nil
}

// printPlacement says below the table how the rows with members of their
// own CPUs were measured, or why they were left out.
func (b *benchmark) printPlacement(w io.Writer) {
	if b.ownMissing != "" {
		fmt.Fprintf(w, "\n%s\n", b.ownMissingLine())
		return
	}
	if !slices.Contains(b.placements, own) {
		return
	}
	fmt.Fprintf(w, "\nRows \"members with their own CPUs\": each member's kube-apiserver and etcd in a cgroup of their own, limited (cpu.cfs_quota_us, period %d µs) to an equal share of the %d CPUs less the hub's %g; the hub's kube-apiserver, etcd and the manager to %g CPUs; the bench's own load and watches unlimited. Co-located rows: no limits. The tuned peer's floods and cold starts there end after %s or %.2fx widgethub's longest time on the row, whichever is later. %s\n",
		cfsPeriod, runtime.NumCPU(), b.hubCPUs, b.hubCPUs, formatDuration(b.ownPeerWindow), ownPeerMargin, b.controlPlaneProcsLine())
}

// controlPlaneProcsLine says how many Ps the fleet's processes ran with.
func (b *benchmark) controlPlaneProcsLine() string {
	procs := "Go's default GOMAXPROCS"
	if b.controlPlaneProcs > 0 {
		procs = fmt.Sprintf("GOMAXPROCS=%d", b.controlPlaneProcs)
	}
	return "The fleet's kube-apiservers and etcds ran with " + procs + ", in both placements."
}
