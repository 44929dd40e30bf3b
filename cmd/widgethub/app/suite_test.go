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
	f, err := fleet.Start(fleet.Options{Members: []string{"alpha", "beta", "gamma"}, BareMembers: []string{"bare"}, Scheme: clusters.NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testFleet = f
	for _, member := range f.Members {
		credentials.addKubeconfig(member.Kubeconfig)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}
	if err := f.Hub.Client.Create(context.Background(), ns); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = f.Stop()
		os.Exit(1)
	}
	stopManager, err := startManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = f.Stop()
		os.Exit(1)
	}
	code := m.Run()
	if err := stopManager(); err != nil {
		fmt.Fprintln(os.Stderr, "stop manager:", err)
		code = 1
	}
	if err := f.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if leaked := credentials.foundIn(logs.String()); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the logs contain %d credentials handed to the operator (e.g. one starting %.6q)\n", len(leaked), leaked[0])
		code = 1
	}
	os.Exit(code)
}

// startManager runs the real hub manager against the suite's hub and returns
// a function that stops it.
func startManager() (stop func() error, err error) {
	return app.Start(context.Background(), testFleet.Hub.Config, managerOptions())
}

// managerOptions are the options of the suite's manager.
func managerOptions() app.Options {
	opts := app.DefaultOptions()
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	opts.MemberSyncTimeout = 10 * time.Second
	return opts
}
