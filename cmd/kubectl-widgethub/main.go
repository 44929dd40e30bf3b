// Command kubectl-widgethub is the kubectl plugin of widgethub: with it on
// PATH, `kubectl widgethub join/unjoin/clusters/widgets` manage the members of
// a hub. See package plugin.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
