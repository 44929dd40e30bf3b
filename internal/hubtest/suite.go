package hubtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/internal/fleet"
)

// The timing of the suites' waits.
const (
	// Within bounds a wait for what the hub does soon.
	Within = 30 * time.Second
	// Poll is the interval of those waits.
	Poll = 100 * time.Millisecond
	// QuietFor is how long a test watches for what must not happen.
	QuietFor = 3 * time.Second
)

var (
	// Fleet is the suite's hub and members.
	Fleet *fleet.Fleet
	// Namespace is the registration namespace of the hub's manager.
	Namespace string
	// Logs holds everything the process logged (controller-runtime and
	// client-go), for the credentials check at the end of the suite.
	Logs LockedBuffer
)

// Use makes f, whose hub's manager reads registrations in namespace, the
// fleet of every helper.
func Use(f *fleet.Fleet, namespace string) {
	Fleet, Namespace = f, namespace
}

// RunSuite runs a suite's tests against the fleet opts describe, whose hub's
// manager, started by start, reads registrations in namespace: it logs to
// stderr and Logs, makes the fleet the helpers' (Use), hands the members'
// kubeconfigs over, creates the namespace, starts the manager, runs the
// tests and stops everything. The run fails when the logs of this process,
// or of any manager process a test started, hold a credential handed over
// (fleet.HandOver). It returns the exit code for os.Exit.
func RunSuite(m *testing.M, opts fleet.Options, namespace string, start func(*fleet.Fleet) (stop func() error, err error)) int {
	logger := zap.New(zap.WriteTo(io.MultiWriter(os.Stderr, &Logs)), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	code := fleet.RunTests(m, opts, func(f *fleet.Fleet) (func() error, error) {
		Use(f, namespace)
		for _, member := range f.Members {
			fleet.HandOverKubeconfig(member.Kubeconfig)
		}
		if err := fleet.EnsureNamespace(context.Background(), f.Hub.Client, namespace); err != nil {
			return nil, err
		}
		return start(f)
	})
	if leaked := fleet.LeakedIn(Logs.String()); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the logs contain %d credentials handed to the operator (e.g. one starting %.6q)\n", len(leaked), leaked[0])
		code = 1
	}
	return code
}
