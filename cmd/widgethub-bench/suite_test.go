//go:build scenarios && !race

package main

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
)

// The suite's fleet: a hub running the real operator, and members flooded and
// quiet. Only the fairness test uses it, so, like that test, it is built only
// for make test-scenarios (build tag scenarios), without -race: make test
// runs this package's unit tests and starts no API server.
var testFleet *fleet.Fleet

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	os.Exit(fleet.RunTests(m, fleet.Options{Members: []string{"flooded", "quiet"}, Scheme: clusters.NewScheme()}, startOperator))
}

// startOperator runs the real operator on the hub of f, the suite's fleet,
// and returns a function that stops it.
func startOperator(f *fleet.Fleet) (stop func() error, err error) {
	testFleet = f
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: registration.DefaultNamespace}}
	if err := f.Hub.Client.Create(context.Background(), ns); err != nil {
		return nil, err
	}
	opts := app.DefaultOptions()
	opts.LeaderElection = false // one manager in-process: no standby to hand over to
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	// The flood must build a backlog in the queue, whatever the machine's
	// speed: the client, not the CPU, holds the flood's reconciles back.
	opts.MemberQPS, opts.MemberBurst = 50, 50
	return app.Start(context.Background(), f.Hub.Config, opts)
}
