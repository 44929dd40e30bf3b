package hubtest

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
)

// GoroutineSnapshot remembers the goroutines (and connections) of this moment,
// after letting those of earlier tests settle.
type GoroutineSnapshot struct {
	ignore goleak.Option
	ids    map[int]bool
	conns  string
}

// TakeGoroutineSnapshot records this moment's goroutines and connections,
// after a second for those of earlier tests to end.
func TakeGoroutineSnapshot() GoroutineSnapshot {
	time.Sleep(time.Second)
	ids := map[int]bool{}
	for id := range goroutines() {
		ids[id] = true
	}
	return GoroutineSnapshot{ignore: goleak.IgnoreCurrent(), ids: ids, conns: OpenConnections()}
}

// ExpectNoneLeftSince fails t unless every goroutine started since s has
// ended, but for those of a watch that an informer older than s opened again
// (client-go's reflectors watch anew every 5 to 10 minutes): they belong to
// the hub or to a member engaged before s, not to what the test started.
func ExpectNoneLeftSince(t *testing.T, s GoroutineSnapshot) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		Fleet.CloseIdleConnections()
		err := goleak.Find(s.ignore)
		if err != nil && s.onlyRewatches(err) {
			return nil
		}
		return err
	}, Within, time.Second).Should(Succeed(), func() string {
		return "connections before: " + s.conns + ", after: " + OpenConnections()
	})
}

// goroutine is one goroutine of runtime.Stack's dump: its stack and the id
// of the goroutine that created it.
type goroutine struct {
	creator int
	stack   string
}

// goroutines are this process's goroutines by id.
func goroutines() map[int]goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := map[int]goroutine{}
	for block := range strings.SplitSeq(string(buf), "\n\n") {
		var id int
		if _, err := fmt.Sscanf(block, "goroutine %d ", &id); err != nil {
			continue
		}
		g := goroutine{stack: block}
		if i := strings.LastIndex(block, " in goroutine "); i >= 0 {
			fmt.Sscanf(block[i:], " in goroutine %d", &g.creator)
		}
		all[id] = g
	}
	return all
}

// onlyRewatches tells whether every goroutine goleak reports in err is part
// of a watch that a reflector older than s reopened.
func (s GoroutineSnapshot) onlyRewatches(err error) bool {
	now := goroutines()
	var rewatch func(id, depth int) bool
	rewatch = func(id, depth int) bool {
		creatorID := now[id].creator
		creator, ok := now[creatorID]
		switch {
		case !ok || depth > 8:
			return false
		case s.ids[creatorID]:
			return strings.Contains(creator.stack, "k8s.io/client-go/tools/cache.(*Reflector)")
		}
		return rewatch(creatorID, depth+1)
	}
	reported := leakedID.FindAllStringSubmatch(err.Error(), -1)
	for _, m := range reported {
		id, _ := strconv.Atoi(m[1])
		if !rewatch(id, 0) {
			return false
		}
	}
	return len(reported) > 0
}

// leakedID finds the id of each goroutine in goleak's report.
var leakedID = regexp.MustCompile(`Goroutine (\d+) in state`)

// OpenConnections describes this process's TCP connections by the fleet
// control plane they reach, to explain a goroutine-leak failure.
func OpenConnections() string {
	out, err := exec.Command("ss", "-tnp").CombinedOutput()
	if err != nil {
		return "ss unavailable: " + err.Error()
	}
	names := map[string]string{}
	for _, cp := range append(Fleet.Members, Fleet.Hub) {
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
