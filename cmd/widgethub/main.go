// Command widgethub is the hub manager: it engages every member cluster
// registered by a kubeconfig Secret and reconciles Widgets there.
package main

import (
	"flag"
	"os"

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
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
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
	log.Info("Starting widgethub", "registrationNamespace", opts.RegistrationNamespace)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}
