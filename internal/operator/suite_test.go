package operator_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/operator"
)

// The suite's fleet: a hub and three members. alpha and beta are registered
// by most tests; gamma is the target of re-registration tests.
var (
	testFleet *fleet.Fleet
	hubNS     = "widgethub-system"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	f, err := fleet.Start(fleet.Options{Members: []string{"alpha", "beta", "gamma"}, Scheme: operator.NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testFleet = f
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
	os.Exit(code)
}

// startManager runs the real hub manager against the suite's hub and returns
// a function that stops it.
func startManager() (stop func() error, err error) {
	opts := operator.DefaultOptions()
	opts.MetricsBindAddress = "0"
	opts.HealthProbeBindAddress = "0"
	opts.MemberSyncTimeout = 10 * time.Second
	mgr, err := operator.New(testFleet.Hub.Config, opts)
	if err != nil {
		return nil, fmt.Errorf("new manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			return fmt.Errorf("manager did not stop within a minute")
		}
	}, nil
}
