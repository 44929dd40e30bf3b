// Command demo is `make demo`: a local widgethub fleet to look at (see
// internal/demo). With --exit-when-ready or DEMO_EXIT_WHEN_READY=1 it exits 0
// once the sample Widgets are Ready in both members, non-zero otherwise.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/widgethub/widgethub/internal/demo"
)

func main() {
	opts := demo.Options{Out: os.Stdout}
	flag.BoolVar(&opts.ExitWhenReady, "exit-when-ready", os.Getenv("DEMO_EXIT_WHEN_READY") == "1",
		"Exit once every sample Widget is Ready (also DEMO_EXIT_WHEN_READY=1).")
	flag.DurationVar(&opts.ReadyTimeout, "ready-timeout", 3*time.Minute, "How long the Widgets may take to become Ready.")
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", "0", "Address of the manager's metrics endpoint; 0 disables it.")
	flag.Parse()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make demo`, which builds the control plane first")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := demo.Run(ctx, opts)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
