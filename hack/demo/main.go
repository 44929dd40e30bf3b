// Command demo is `make demo`: a hub and two members (alpha and beta) as
// local control planes (internal/fleet), the hub manager in-process
// (cmd/widgethub/app), both members joined with the kubectl plugin's own code
// (cmd/kubectl-widgethub/plugin), beta then registered through a
// ClusterProfile and an access provider instead (the widgethub-credential
// plugin, see docs/registration.md), the sample Widgets of config/samples applied
// to both, and a stand-in for the Deployment controller, which local control
// planes do not run, so that the Widgets become Ready. It prints what it does,
// then the plugin's view of the fleet and the kubeconfig files to explore it
// with, and keeps the fleet up until it is interrupted. With --exit-when-ready
// or DEMO_EXIT_WHEN_READY=1 it exits 0 once the sample Widgets are Ready in
// both members, non-zero otherwise (for tests and CI).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	opts := options{out: os.Stdout}
	flag.BoolVar(&opts.exitWhenReady, "exit-when-ready", os.Getenv("DEMO_EXIT_WHEN_READY") == "1",
		"Exit once every sample Widget is Ready (also DEMO_EXIT_WHEN_READY=1).")
	flag.DurationVar(&opts.readyTimeout, "ready-timeout", 3*time.Minute, "How long the Widgets may take to become Ready.")
	flag.StringVar(&opts.metricsBindAddress, "metrics-bind-address", "0", "Address of the manager's metrics endpoint, served over plain HTTP (--metrics-secure=false); 0 disables it.")
	flag.Parse()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make demo`, which builds the control plane first")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, opts)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
