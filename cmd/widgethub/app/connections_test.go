package app_test

import (
	"fmt"
	"testing"
	"time"

	"net/url"
	"os"
	"os/exec"
	"strings"

	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
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

// goroutineSnapshot remembers the goroutines (and connections) of this moment,
// after letting those of earlier tests settle.
type goroutineSnapshot struct {
	ignore goleak.Option
	conns  string
}

func takeGoroutineSnapshot() goroutineSnapshot {
	time.Sleep(time.Second)
	return goroutineSnapshot{ignore: goleak.IgnoreCurrent(), conns: openConnections()}
}

// expectNoneLeftSince fails t unless every goroutine started since s has ended.
func expectNoneLeftSince(t *testing.T, s goroutineSnapshot) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		testFleet.CloseIdleConnections()
		return goleak.Find(s.ignore)
	}, eventually, time.Second).Should(Succeed(), func() string {
		return "connections before: " + s.conns + ", after: " + openConnections()
	})
}
