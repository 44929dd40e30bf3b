// Command runc-capfilter is an OCI runtime wrapper for Docker hosts whose
// capability bounding set lacks capabilities that Docker grants to
// --privileged containers (on this workplace's VMs: CAP_SYS_RESOURCE). There
// runc fails with "unable to apply caps: operation not permitted", which makes
// kind unusable because kind runs every node --privileged.
//
// The wrapper removes from the container's (create/run) or process's (exec)
// capability sets every capability that this process's own bounding set lacks
// -- a capability no child could hold anyway -- and then executes the real
// runc with the unchanged arguments. Registered as a Docker runtime in
// daemon.json (see e2e/nodeimage/docker-host-setup.sh).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// capNames lists the Linux capabilities by number.
var capNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
	"SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
	"SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
	"BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "--register" {
		// runc-capfilter --register DAEMON_JSON NAME: make this binary
		// Docker's default runtime under NAME (keeps the file's other keys).
		if err := register(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintf(os.Stderr, "runc-capfilter: %v\n", err)
			os.Exit(1)
		}
		return
	}
	realRunc := os.Getenv("RUNC_CAPFILTER_RUNTIME")
	if realRunc == "" {
		realRunc = "/usr/sbin/runc"
	}
	if err := filter(os.Args[1:]); err != nil {
		// Never block the runtime: report and run runc as asked.
		fmt.Fprintf(os.Stderr, "runc-capfilter: %v\n", err)
	}
	args := append([]string{realRunc}, os.Args[1:]...)
	if err := syscall.Exec(realRunc, args, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "runc-capfilter: exec %s: %v\n", realRunc, err)
		os.Exit(127)
	}
}

// filter finds the JSON document runc is about to read and rewrites its
// capabilities when some of them are not in the bounding set.
func filter(args []string) error {
	cmd, rest := subcommand(args)
	var file string
	switch cmd {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		file = filepath.Join(bundle, "config.json")
		return rewrite(file, func(doc map[string]any) map[string]any {
			p, _ := doc["process"].(map[string]any)
			return p
		})
	case "exec":
		file = flagValue(rest, "--process", "-p")
		if file == "" {
			return nil
		}
		return rewrite(file, func(doc map[string]any) map[string]any { return doc })
	}
	return nil
}

// subcommand skips runc's global flags and returns the command and its args.
func subcommand(args []string) (string, []string) {
	withValue := map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, args[i+1:]
		}
		if withValue[a] {
			i++
		}
	}
	return "", nil
}

func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if strings.HasPrefix(a, n+"=") {
				return strings.TrimPrefix(a, n+"=")
			}
		}
	}
	return ""
}

func rewrite(file string, process func(map[string]any) map[string]any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep large integers (rlimits, uids) exact
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	proc := process(doc)
	if proc == nil {
		return nil
	}
	caps, _ := proc["capabilities"].(map[string]any)
	if caps == nil {
		return nil
	}
	allowed, err := boundingSet()
	if err != nil {
		return err
	}
	changed := false
	for set, v := range caps {
		list, _ := v.([]any)
		kept := make([]any, 0, len(list))
		for _, c := range list {
			name, _ := c.(string)
			if allowed[name] || !known(name) {
				kept = append(kept, c)
			} else {
				changed = true
			}
		}
		caps[set] = kept
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, st.Mode().Perm())
}

func known(name string) bool {
	for _, n := range capNames {
		if "CAP_"+n == name {
			return true
		}
	}
	return false
}

// boundingSet reads CapBnd of this process and returns the names it holds.
func boundingSet() (map[string]bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		hex, ok := strings.CutPrefix(sc.Text(), "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for i, n := range capNames {
			if mask&(1<<uint(i)) != 0 {
				set["CAP_"+n] = true
			}
		}
		return set, nil
	}
	return nil, fmt.Errorf("no CapBnd in /proc/self/status")
}

// register adds this executable as runtime name to Docker's daemon.json and
// makes it the default runtime.
func register(daemonJSON, name string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	doc := map[string]any{}
	if data, err := os.ReadFile(daemonJSON); err == nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("%s: %w", daemonJSON, err)
		}
	} else if err != nil && !os.IsNotExist(err) {
		return err
	}
	runtimes, _ := doc["runtimes"].(map[string]any)
	if runtimes == nil {
		runtimes = map[string]any{}
	}
	runtimes[name] = map[string]any{"path": self}
	doc["runtimes"] = runtimes
	doc["default-runtime"] = name
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(daemonJSON), 0o755); err != nil {
		return err
	}
	return os.WriteFile(daemonJSON, append(out, '\n'), 0o644)
}
