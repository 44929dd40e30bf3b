package app_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// The suite's fleet: a hub and four members. alpha and beta are registered
// by most tests; gamma is the target of re-registration and fault tests;
// bare starts without the Widget CRD.
var (
	testFleet *fleet.Fleet
	hubNS     = "widgethub-system"
)

func TestMain(m *testing.M) {
	opts := fleet.Options{Members: []string{"alpha", "beta", "gamma"}, BareMembers: []string{"bare"}, Scheme: clusters.NewScheme()}
	os.Exit(hubtest.RunSuite(m, opts, hubNS, func(f *fleet.Fleet) (func() error, error) {
		testFleet = f
		return startManager()
	}))
}

// startManager runs the real hub manager against the suite's hub and returns
// a function that stops it.
func startManager() (stop func() error, err error) {
	return app.Start(context.Background(), testFleet.Hub.Config, managerOptions())
}

// managerOptions are the options of the suite's manager: the defaults, but
// for the engine's clocks, short enough for tests (as in the engine's suite,
// providers/members), and no listeners.
func managerOptions() app.Options {
	opts := app.DefaultOptions()
	opts.LeaderElection = false // one manager in-process: no standby to hand over to
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	opts.MemberSyncTimeout = 10 * time.Second
	opts.ProbeInterval, opts.ProbeTimeout = 2*time.Second, 2*time.Second
	opts.ProbeRefresh, opts.MissingKindRetry, opts.MinReengageInterval = 6*time.Second, 2*time.Second, 2*time.Second
	return opts
}
