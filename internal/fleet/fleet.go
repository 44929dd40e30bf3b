package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is one running API server of the fleet.
type ControlPlane struct {
	// Name is the cluster's name: "hub", or the member's cluster name.
	Name string
	Env  *envtest.Environment
	// Config is an admin rest.Config.
	Config *rest.Config
	// Client is a direct (uncached) admin client.
	Client client.Client
	// Kubeconfig is an admin kubeconfig document for this control plane.
	Kubeconfig []byte

	httpClient *http.Client
	// audit tells to start the API server with an audit log at auditLog.
	audit              bool
	auditDir, auditLog string
}

// Fleet is a hub and its members.
type Fleet struct {
	Hub     *ControlPlane
	Members []*ControlPlane

	scheme     *kruntime.Scheme
	memberCRDs []string
	gomaxprocs int
}

// Options describe the fleet to start.
type Options struct {
	// Members are the members' cluster names.
	Members []string
	// Scheme of the clients. Required.
	Scheme *kruntime.Scheme
	// HubCRDs and MemberCRDs are CRD files or directories to install.
	// They default to CRDPaths(): every CRD of config/crd/bases.
	HubCRDs, MemberCRDs []string
	// BareMembers are members started without any CRD.
	BareMembers []string
	// AuditMembers makes every member's API server write an audit log of
	// the writes, lists and watches it serves (see ControlPlane.Writes and
	// ControlPlane.Reads).
	AuditMembers bool
	// AuditHub does the same for the hub's API server.
	AuditHub bool
	// GOMAXPROCS, when positive, is the GOMAXPROCS the fleet's
	// kube-apiservers and etcds start with, AddMembers' too (see
	// withGOMAXPROCS); zero keeps Go's default.
	GOMAXPROCS int
}

// CRDPaths is config/crd/bases of this repository.
func CRDPaths() []string {
	_, file, _, _ := runtime.Caller(0)
	return []string{filepath.Join(filepath.Dir(file), "..", "..", "config", "crd", "bases")}
}

// Start starts the hub and the members in parallel. On error, whatever
// started is stopped again.
func Start(opts Options) (*Fleet, error) {
	if opts.Scheme == nil {
		return nil, errors.New("fleet: Options.Scheme is required")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("fleet: KUBEBUILDER_ASSETS is not set; run through `make test` or set it to the output of hack/control-plane.sh")
	}
	if opts.HubCRDs == nil {
		opts.HubCRDs = CRDPaths()
	}
	if opts.MemberCRDs == nil {
		opts.MemberCRDs = CRDPaths()
	}
	f := &Fleet{Hub: &ControlPlane{Name: "hub", audit: opts.AuditHub}, scheme: opts.Scheme, memberCRDs: opts.MemberCRDs,
		gomaxprocs: opts.GOMAXPROCS}
	planes := []*ControlPlane{f.Hub}
	crds := [][]string{opts.HubCRDs}
	for _, name := range opts.Members {
		planes = append(planes, &ControlPlane{Name: name, audit: opts.AuditMembers})
		crds = append(crds, opts.MemberCRDs)
	}
	for _, name := range opts.BareMembers {
		planes = append(planes, &ControlPlane{Name: name})
		crds = append(crds, nil)
	}
	f.Members = planes[1:]
	if err := f.start(planes, crds); err != nil {
		_ = f.Stop()
		return nil, err
	}
	return f, nil
}

// AddMembers starts more members, with the fleet's member CRDs, and returns
// them. On error, those of them that started keep running until Stop.
func (f *Fleet) AddMembers(names ...string) ([]*ControlPlane, error) {
	return f.addMembers(false, names)
}

// AddAuditedMembers is AddMembers for members whose API servers write an
// audit log (see ControlPlane.Writes and ControlPlane.Reads).
func (f *Fleet) AddAuditedMembers(names ...string) ([]*ControlPlane, error) {
	return f.addMembers(true, names)
}

func (f *Fleet) addMembers(audit bool, names []string) ([]*ControlPlane, error) {
	planes := make([]*ControlPlane, len(names))
	crds := make([][]string, len(names))
	for i, name := range names {
		planes[i] = &ControlPlane{Name: name, audit: audit}
		crds[i] = f.memberCRDs
	}
	f.Members = append(f.Members, planes...)
	return planes, f.start(planes, crds)
}

// start starts planes in parallel, each with its CRDs.
func (f *Fleet) start(planes []*ControlPlane, crds [][]string) error {
	return withGOMAXPROCS(f.gomaxprocs, func() error {
		var wg sync.WaitGroup
		errs := make([]error, len(planes))
		for i, cp := range planes {
			wg.Go(func() { errs[i] = cp.start(f.scheme, crds[i]) })
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// withGOMAXPROCS runs start with GOMAXPROCS set to procs (when positive)
// in this process's environment, which the processes it starts inherit
// (envtest has no environment of its own for them), and restores the
// environment after it. This process's own runtime read GOMAXPROCS at its
// start and keeps it.
func withGOMAXPROCS(procs int, start func() error) error {
	if procs <= 0 {
		return start()
	}
	before, had := os.LookupEnv("GOMAXPROCS")
	if err := os.Setenv("GOMAXPROCS", strconv.Itoa(procs)); err != nil {
		return err
	}
	err := start()
	if had {
		return errors.Join(err, os.Setenv("GOMAXPROCS", before))
	}
	return errors.Join(err, os.Unsetenv("GOMAXPROCS"))
}

func (cp *ControlPlane) start(scheme *kruntime.Scheme, crds []string) error {
	cp.Env = &envtest.Environment{
		Scheme:                scheme,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: len(crds) > 0,
		// Shared 2-core machines start several API servers at once.
		ControlPlaneStartTimeout: 3 * time.Minute,
	}
	// A collection deleted at once (the bench's clean-up between runs) is
	// deleted by several workers, whose writes etcd commits together.
	cp.Env.ControlPlane.GetAPIServer().Configure().Set("delete-collection-workers", "4")
	if cp.audit {
		if err := cp.configureAudit(); err != nil {
			return err
		}
	}
	cfg, err := cp.Env.Start()
	if err != nil {
		return fmt.Errorf("start control plane %q: %w", cp.Name, err)
	}
	cp.Config = cfg
	if cp.httpClient, err = rest.HTTPClientFor(cfg); err != nil {
		return fmt.Errorf("http client for %q: %w", cp.Name, err)
	}
	if cp.Client, err = client.New(cfg, client.Options{Scheme: scheme, HTTPClient: cp.httpClient}); err != nil {
		return fmt.Errorf("client for %q: %w", cp.Name, err)
	}
	admin, err := cp.Env.AddUser(envtest.User{Name: "fleet-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("admin user for %q: %w", cp.Name, err)
	}
	if cp.Kubeconfig, err = admin.KubeConfig(); err != nil {
		return fmt.Errorf("admin kubeconfig for %q: %w", cp.Name, err)
	}
	HandOverKubeconfig(cp.Kubeconfig)
	return nil
}

// Member returns the member called name, or nil.
func (f *Fleet) Member(name string) *ControlPlane {
	for _, m := range f.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// CloseIdleConnections closes the idle connections of every Client, so that a
// goroutine check sees only the connections of the code under test.
func (f *Fleet) CloseIdleConnections() {
	for _, cp := range append([]*ControlPlane{f.Hub}, f.Members...) {
		utilnet.CloseIdleConnectionsFor(cp.httpClient.Transport)
	}
}

// Stop stops every control plane that started.
func (f *Fleet) Stop() error {
	var errs []error
	for _, cp := range append([]*ControlPlane{f.Hub}, f.Members...) {
		if cp != nil && cp.Env != nil {
			if err := cp.Env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop %q: %w", cp.Name, err))
			}
			if cp.auditDir != "" {
				errs = append(errs, os.RemoveAll(cp.auditDir))
			}
		}
	}
	return errors.Join(errs...)
}

// EnsureNamespace creates the namespace name through c unless it exists.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// RunTests is a TestMain for a package whose tests share a fleet: it starts
// the fleet of opts, hands it to setUp, runs the tests (m is the package's
// *testing.M), calls the tearDown setUp returned, if any, and stops the fleet.
// It prints errors to stderr and returns the exit code for os.Exit: 1 when
// the fleet does not start, setUp or tearDown fail, or the log of a process
// started by StartProcess held a credential handed over, else that of the
// tests.
func RunTests(m interface{ Run() int }, opts Options, setUp func(*Fleet) (tearDown func() error, err error)) int {
	f, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := f.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		removeBuilds()
	}()
	tearDown, err := setUp(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if tearDown != nil {
		if err := tearDown(); err != nil {
			fmt.Fprintln(os.Stderr, "tear down:", err)
			code = 1
		}
	}
	for _, leak := range processLeaks() {
		fmt.Fprintln(os.Stderr, "FAIL:", leak)
		code = 1
	}
	return code
}
