//go:build e2e

// Package e2e runs widgethub end to end on kind clusters: a hub with the
// operator deployed from config/default and two members joined with the
// kubectl plugin. Run it with `make e2e` (see README.md).
package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Names of the kind clusters. The members are registered on the hub under
// the names in registrations.
const (
	hubName         = "wh-hub"
	registrationsNS = "widgethub-system"
	managerName     = "widgethub"

	defaultNodeImage = "widgethub/kind-node:v1.36.3"
	defaultImage     = "widgethub/widgethub:e2e"
)

// members are the kind clusters joined to the hub, by registration name.
var members = []struct{ registration, kind string }{
	{"m1", "wh-m1"},
	{"m2", "wh-m2"},
}

// env is what the environment asks of a run.
type env struct {
	nodeImage string // E2E_NODE_IMAGE: the kind node image
	image     string // E2E_IMAGE: the operator image to build (and its tag prefix)
	keep      bool   // E2E_KEEP=1: keep (and reuse) the clusters
	root      string // the repository root
}

func loadEnv(t *testing.T) env {
	t.Helper()
	e := env{
		nodeImage: os.Getenv("E2E_NODE_IMAGE"),
		image:     os.Getenv("E2E_IMAGE"),
		keep:      os.Getenv("E2E_KEEP") != "" && os.Getenv("E2E_KEEP") != "0",
	}
	if e.nodeImage == "" {
		e.nodeImage = defaultNodeImage
	}
	if e.image == "" {
		e.image = defaultImage
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the e2e sources")
	}
	e.root = filepath.Dir(filepath.Dir(file))
	return e
}

// kubeconfigDir is where the clusters' kubeconfigs are written: a stable
// directory when the clusters are kept, so they can be used after the run.
func (e env) kubeconfigDir(t *testing.T) string {
	if !e.keep {
		return t.TempDir()
	}
	dir := filepath.Join(os.TempDir(), "widgethub-e2e")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Timeouts. A kind node on a loaded 2-core machine is slow: be generous.
const (
	createTimeout   = 5 * time.Minute // one kind cluster up with a Ready node
	managerTimeout  = 4 * time.Minute // the manager Deployment Available
	engageTimeout   = 2 * time.Minute // a joined member Engaged
	widgetTimeout   = 3 * time.Minute // a Widget's pods Running and Ready=True
	unreachableWait = 2 * time.Minute // a stopped member turns Unreachable
	restartTimeout  = 4 * time.Minute // a restarted member node answers again
	quietPeriod     = 30 * time.Second
)
