package operator_test

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
)

// openConnections describes this process's TCP connections by the fleet
// control plane they reach, to explain a goroutine-leak failure.
func openConnections() string {
	out, err := exec.Command("ss", "-tnp").CombinedOutput()
	if err != nil {
		return "ss unavailable: " + err.Error()
	}
	names := map[string]string{}
	for _, cp := range append(testFleet.Members, testFleet.Hub) {
		if u, err := url.Parse(cp.Config.Host); err == nil {
			names[u.Host] = cp.Name
		}
	}
	mine := fmt.Sprintf("pid=%d,", os.Getpid())
	counts := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if !strings.Contains(line, mine) || len(fields) < 5 {
			continue
		}
		name, ok := names[fields[4]]
		if !ok {
			name = fields[4]
		}
		counts[name]++
	}
	return fmt.Sprint(counts)
}
