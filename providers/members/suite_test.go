package members_test

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	"github.com/widgethub/widgethub/providers/kubeconfig"
	"github.com/widgethub/widgethub/providers/members"
	"github.com/widgethub/widgethub/reconcilers/controller"
	"github.com/widgethub/widgethub/reconcilers/widget"
)

// The engine's suite: a hub and four members (alpha and beta registered by
// most tests; gamma the target of re-registrations and faults; bare started
// without the Widget CRD), and on the hub the engine with the kubeconfig
// Secret source and the Widget reconciler, wired as cmd/widgethub/app wires
// them, with the engine's clocks short (engineOptions) so that the tests
// wait seconds where the defaults would make them wait minutes.
//
// The tests that mostly wait on those clocks call t.Parallel, so that make
// test (-parallel 8) runs them side by side once the others are done. Each
// has what it counts or breaks to itself: a registration of its own, and a
// member of its own where it takes something away from the member or counts
// requests there (hubtest.LateMembers, started before t.Parallel).
var (
	testFleet *fleet.Fleet
	hubNS     = "widgethub-system"
)

func TestMain(m *testing.M) {
	opts := fleet.Options{Members: []string{"alpha", "beta", "gamma"}, BareMembers: []string{"bare"}, Scheme: clusters.NewScheme()}
	os.Exit(hubtest.RunSuite(m, opts, hubNS, func(f *fleet.Fleet) (func() error, error) {
		testFleet = f
		return startEngine(f.Hub)
	}))
}

// engineOptions are the options of the suite's engine: widgethub's, with
// clocks short enough for tests. The failure threshold is the default: the
// tests count probes against it.
func engineOptions() members.Options {
	return members.Options{
		Namespace:      hubNS,
		Scheme:         clusters.NewScheme(),
		WatchedObjects: []client.Object{&v1alpha1.Widget{}, &appsv1.Deployment{}},
		CacheByObject:  map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Label: widget.ManagedDeployments()}},
		CacheTransform: widget.CacheTransform,
		MaxObjects:     50000,

		SyncTimeout:         10 * time.Second,
		ProbeInterval:       2 * time.Second,
		ProbeTimeout:        2 * time.Second,
		FailureThreshold:    members.DefaultFailureThreshold,
		ProbeRefresh:        6 * time.Second,
		MissingKindRetry:    2 * time.Second,
		MinReengageInterval: 2 * time.Second,
		// Renewals within seconds of a 10-minute token (renew_fleet_test.go).
		Renewal: members.RenewalOptions{Remaining: renewRemaining, MinInterval: renewMinInterval},
	}
}

// memberConfig is how the suite's engine builds member configs.
var memberConfig = connect.ConfigOptions{QPS: connect.DefaultQPS, Burst: connect.DefaultBurst,
	UserAgent: "widgethub", RequestTimeout: connect.DefaultRequestTimeout}

// startEngine runs the engine and the Widget reconciler against hub and
// returns a function that stops them.
func startEngine(hub *fleet.ControlPlane) (stop func() error, err error) {
	opts := engineOptions()
	provider := members.New(opts)
	mgr, err := mcmanager.New(hub.Config, provider, manager.Options{
		Scheme:                 opts.Scheme,
		Cache:                  members.CacheOptions(kubeconfig.CacheOptions(cache.Options{}, hubNS), hubNS),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if err := provider.Register(mgr, kubeconfig.New(hubNS, memberConfig, mgr.GetLocalManager().GetClient())); err != nil {
		return nil, err
	}
	if _, err := controller.New(widget.ControllerName, mgr, controller.Options{Reconciler: &widget.Reconciler{Clusters: mgr},
		MaxConcurrentReconciles: 32, Outcomes: provider}, widget.Sources()...); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		return <-done
	}, nil
}
