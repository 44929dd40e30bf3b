package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// cpuCgroupMount is where the cgroup v1 cpu controller is mounted.
const cpuCgroupMount = "/sys/fs/cgroup/cpu"

// minQuota is the smallest cfs_quota_us the kernel accepts.
const minQuota = 1000

// cfsPeriod is the groups' cfs_period_us: a tenth of the default, so that
// a group that spent its quota waits at most a few ms, as a process on
// machines of its own would not wait at all (with 100 ms, a member of half
// a CPU that bursts on two stalls for 75 ms).
const cfsPeriod = 10000

// maxShares is cgroup v1's highest cpu.shares (the kernel's MAX_SHARES):
// the weight of the bench's group against the processes outside it, 1024
// each.
const maxShares = 1 << 18

// cpuCgroups are CPU budgets of the bench's processes: one cgroup v1 cpu
// group per name (a control plane, "hub" for the hub and the managers),
// inside a group of the bench's own, all removed by remove.
type cpuCgroups struct {
	// dir is the bench's group; parent is the group it was made in, where
	// the processes are while not grouped and go back to at the end.
	dir, parent string
	groups      []string
	// pids are the processes of each group; grouped says whether they are
	// in their groups now or in the parent, where nothing groups them (the
	// co-located rows: cgroup v1 shares CPU time equally between sibling
	// groups, which would change how the machine is shared).
	pids    map[string][]int
	grouped bool
}

// errNoCgroups is wrapped when the machine cannot give the bench cgroups at
// all (not root, no cgroup v1 cpu controller), as opposed to a controller
// that refuses them.
var errNoCgroups = errors.New("no cgroups here")

// openCPUCgroups makes the bench's group in the cpu controller mounted at
// mount, under the group at path own within it (the bench's own group), and
// checks that a quota can be written. The error says why it cannot.
func openCPUCgroups(mount, own string, euid int) (*cpuCgroups, error) {
	if euid != 0 {
		return nil, fmt.Errorf("%w: not running as root, cannot make cgroups", errNoCgroups)
	}
	parent := filepath.Join(mount, own)
	if _, err := os.Stat(filepath.Join(parent, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("%w: no cgroup v1 cpu controller at %s (%v)", errNoCgroups, mount, err)
	}
	c := &cpuCgroups{dir: filepath.Join(parent, fmt.Sprintf("widgethub-bench-%d", os.Getpid())), parent: parent}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		if errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			err = fmt.Errorf("%w: %w", errNoCgroups, err) // a container's read-only /sys/fs/cgroup, say
		}
		return nil, fmt.Errorf("cannot make a cgroup: %w", err)
	}
	if err := writeControl(c.dir, "cpu.cfs_quota_us", "-1"); err != nil {
		return nil, errors.Join(fmt.Errorf("cgroup %s refused: %w", c.dir, err), c.remove())
	}
	// The grouped processes get their budgets before anything outside the
	// groups runs, as on machines of their own. With the default weight the
	// groups together would weigh what one busy thread of the bench's load
	// weighs, and a member waited for the flood's writers.
	if err := writeControl(c.dir, "cpu.shares", strconv.Itoa(maxShares)); err != nil {
		return nil, errors.Join(fmt.Errorf("cgroup %s refused: %w", c.dir, err), c.remove())
	}
	return c, nil
}

// ownCgroupPath is the cpu controller's path of this process, from
// /proc/self/cgroup; "/" when it is not listed.
func ownCgroupPath() string {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	return cgroupPathOf(string(raw), "cpu")
}

// cgroupPathOf is the path of controller in a /proc/<pid>/cgroup text.
func cgroupPathOf(text, controller string) string {
	for line := range strings.SplitSeq(text, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), controller) {
			return parts[2]
		}
	}
	return "/"
}

// writeControl writes value to a control file that must exist already (a
// cgroup makes its own; a plain directory has none).
func writeControl(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}

// add makes pids processes of the group name, made if it is new, and moves
// them into it while the processes are grouped. Threads and children they
// start later go with them.
func (c *cpuCgroups) add(name string, pids ...int) error {
	dir := filepath.Join(c.dir, name)
	if !slices.Contains(c.groups, name) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", name, err)
		}
		c.groups = append(c.groups, name)
		if err := writeControl(dir, "cpu.cfs_period_us", strconv.Itoa(cfsPeriod)); err != nil {
			return fmt.Errorf("cgroup %s: %w", name, err)
		}
	}
	if c.pids == nil {
		c.pids = map[string][]int{}
	}
	c.pids[name] = append(c.pids[name], pids...)
	if !c.grouped {
		return nil
	}
	return c.move(name, dir, pids)
}

// group moves every process into its group (on) or into the parent (off).
func (c *cpuCgroups) group(on bool) error {
	if on == c.grouped {
		return nil
	}
	c.grouped = on
	var errs []error
	for _, name := range c.groups {
		dir := c.parent
		if on {
			dir = filepath.Join(c.dir, name)
		}
		errs = append(errs, c.move(name, dir, c.pids[name]))
	}
	return errors.Join(errs...)
}

// move moves the processes pids of the group name into dir, and forgets
// those that have exited.
func (c *cpuCgroups) move(name, dir string, pids []int) error {
	var gone []int
	defer func() {
		c.pids[name] = slices.DeleteFunc(c.pids[name], func(p int) bool { return slices.Contains(gone, p) })
	}()
	for _, pid := range pids {
		err := writeControl(dir, "cgroup.procs", strconv.Itoa(pid))
		if errors.Is(err, syscall.ESRCH) {
			gone = append(gone, pid)
			continue
		}
		if err != nil {
			return fmt.Errorf("move process %d of %s into %s: %w", pid, name, dir, err)
		}
	}
	return nil
}

// setCPUs limits the group name to cpus CPUs; cpus <= 0 removes the limit.
func (c *cpuCgroups) setCPUs(name string, cpus float64) error {
	quota := -1
	if cpus > 0 {
		quota = max(minQuota, int(cpus*cfsPeriod))
	}
	if err := writeControl(filepath.Join(c.dir, name), "cpu.cfs_quota_us", strconv.Itoa(quota)); err != nil {
		return fmt.Errorf("cgroup %s: %w", name, err)
	}
	return nil
}

// throttled is cpu.stat of the group name: the periods it ran in, those it
// was throttled in, and how long it was throttled (ns).
func (c *cpuCgroups) throttled(name string) (periods, throttled, ns int64, err error) {
	raw, err := os.ReadFile(filepath.Join(c.dir, name, "cpu.stat"))
	if err != nil {
		return 0, 0, 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		key, value, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(value, 10, 64)
		switch key {
		case "nr_periods":
			periods = n
		case "nr_throttled":
			throttled = n
		case "throttled_time":
			ns = n
		}
	}
	return periods, throttled, ns, nil
}

// remove moves the processes still in the groups back to the parent group
// and removes the groups.
func (c *cpuCgroups) remove() error {
	var errs []error
	for _, dir := range append(c.groupDirs(), c.dir) {
		raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err == nil {
			for pid := range strings.FieldsSeq(string(raw)) {
				// A process may exit meanwhile: the rmdir below tells.
				_ = writeControl(c.parent, "cgroup.procs", pid)
			}
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (c *cpuCgroups) groupDirs() []string {
	dirs := make([]string, len(c.groups))
	for i, name := range c.groups {
		dirs[i] = filepath.Join(c.dir, name)
	}
	return dirs
}

// processesWithArg are the pids of the running processes whose command
// line holds one of args as an argument of its own.
func processesWithArg(args ...string) ([]int, error) {
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, path := range cmdlines {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // the process has exited
		}
		for arg := range strings.SplitSeq(string(raw), "\x00") {
			if slices.Contains(args, arg) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}
