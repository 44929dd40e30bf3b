package hubtest

import (
	"sync"
	"testing"

	"github.com/widgethub/widgethub/internal/fleet"
)

// LateMembers are members of the suite's Fleet that only some tests use,
// started together at the first Get. Fleet's members are not safe to add
// beside a test that reads them: a parallel test calls Get before
// t.Parallel.
type LateMembers struct {
	Names []string
	// Audit gives them an audit log (fleet.ControlPlane.Reads, Writes).
	Audit bool

	once   sync.Once
	planes map[string]*fleet.ControlPlane
	err    error
}

// Get returns the member called name, starting them all first if need be.
func (l *LateMembers) Get(t *testing.T, name string) *fleet.ControlPlane {
	t.Helper()
	l.once.Do(func() {
		add := Fleet.AddMembers
		if l.Audit {
			add = Fleet.AddAuditedMembers
		}
		var planes []*fleet.ControlPlane
		if planes, l.err = add(l.Names...); l.err != nil {
			return
		}
		l.planes = map[string]*fleet.ControlPlane{}
		for i, p := range planes {
			l.planes[l.Names[i]] = p
			fleet.HandOverKubeconfig(p.Kubeconfig)
		}
	})
	if l.err != nil {
		t.Fatalf("start the members %v: %v", l.Names, l.err)
	}
	plane := l.planes[name]
	if plane == nil {
		t.Fatalf("no member %q among %v", name, l.Names)
	}
	return plane
}
