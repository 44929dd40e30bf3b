package app_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
)

// The suite's fleet: a hub and four members. alpha and beta are registered
// by most tests; gamma is the target of re-registration and fault tests;
// bare starts without the Widget CRD.
var (
	testFleet *fleet.Fleet
	hubNS     = "widgethub-system"
	// logs holds everything the manager and client-go logged, for the
	// credentials check at the end of the suite.
	logs lockedBuffer
	// credentials are secrets the tests handed to the operator; none may be logged.
	credentials credentialSet
)

func TestMain(m *testing.M) {
	logger := zap.New(zap.WriteTo(io.MultiWriter(os.Stderr, &logs)), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	opts := fleet.Options{Members: []string{"alpha", "beta", "gamma"}, BareMembers: []string{"bare"}, Scheme: clusters.NewScheme()}
	code := fleet.RunTests(m, opts, setUpSuite)
	if leaked := credentials.foundIn(logs.String()); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the logs contain %d credentials handed to the operator (e.g. one starting %.6q)\n", len(leaked), leaked[0])
		code = 1
	}
	os.Exit(code)
}

// setUpSuite makes f the suite's fleet, creates the registration namespace on
// its hub and starts the manager; it returns a function that stops the manager.
func setUpSuite(f *fleet.Fleet) (tearDown func() error, err error) {
	testFleet = f
	for _, member := range f.Members {
		credentials.addKubeconfig(member.Kubeconfig)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}
	if err := f.Hub.Client.Create(context.Background(), ns); err != nil {
		return nil, err
	}
	return startManager()
}

// startManager runs the real hub manager against the suite's hub and returns
// a function that stops it.
func startManager() (stop func() error, err error) {
	return app.Start(context.Background(), testFleet.Hub.Config, managerOptions())
}

// managerOptions are the options of the suite's manager.
func managerOptions() app.Options {
	opts := app.DefaultOptions()
	opts.LeaderElection = false // one manager in-process: no standby to hand over to
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	opts.MemberSyncTimeout = 10 * time.Second
	// Renewals within seconds of a 10-minute token (renew_test.go).
	opts.TokenRenewRemaining = renewRemaining
	opts.TokenRenewMinInterval = renewMinInterval
	return opts
}
