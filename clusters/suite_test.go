package clusters_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
)

// testMember is a real API server (kube-apiserver and etcd) for the tests
// that need a member to talk to; the fleet's hub goes unused.
var testMember *fleet.ControlPlane

func TestMain(m *testing.M) {
	f, err := fleet.Start(fleet.Options{Members: []string{"member"}, Scheme: clusters.NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testMember = f.Member("member")
	code := m.Run()
	if err := f.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
