// Command widgethub is the hub manager: it engages every member cluster
// registered by a kubeconfig Secret and reconciles Widgets there.
package main

import (
	"flag"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/cmd/widgethub/app"
)

func main() {
	opts := app.DefaultOptions()
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	// --kubeconfig is registered by controller-runtime's config package.
	flag.Parse()
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	// client-go (leader election among others) logs through klog: the same
	// sink, so "successfully acquired lease" has the same format as the rest.
	klog.SetLogger(logger)
	log := ctrl.Log.WithName("setup")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Cannot load the hub's kubeconfig")
		os.Exit(1)
	}
	mgr, err := app.New(cfg, opts)
	if err != nil {
		log.Error(err, "Cannot set up the manager")
		os.Exit(1)
	}
	log.Info("Starting widgethub", "registrationNamespace", opts.RegistrationNamespace, "leaderElection", opts.LeaderElection && !opts.Sharding,
		"sharding", opts.Sharding, "replica", opts.ReplicaID)
	// Exit as soon as the manager stops: with leader election the Lease is
	// released on the way out (LeaderElectionReleaseOnCancel), and a standby
	// takes over at once, so nothing of this process may run after Start.
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}
