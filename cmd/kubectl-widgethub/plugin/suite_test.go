package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
)

// The suite's fleet: a hub with the hub CRDs and two members, alpha and beta,
// without any CRD: join installs the Widget CRD.
var (
	testFleet *fleet.Fleet
	// kubeconfigs are admin kubeconfig files: All has contexts hub, alpha and beta.
	kubeconfigs *fleet.KubeconfigFiles
	hubNS       = "widgethub-system"
	// suiteDir holds the suite's files (kubeconfigs, built binaries); it
	// goes when the tests end.
	suiteDir string
)

func TestMain(m *testing.M) {
	// The hub's clients know ClusterProfiles too (profile_test.go).
	scheme := clusters.NewScheme()
	if err := inventoryv1alpha1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := fleet.Options{Members: []string{"alpha", "beta"}, Scheme: scheme, MemberCRDs: []string{}}
	os.Exit(fleet.RunTests(m, opts, setUpSuite))
}

// setUpSuite writes the fleet's kubeconfig files and the hub's registration
// namespace, and makes the hub serve ClusterProfiles; the files go when the
// tests end.
func setUpSuite(f *fleet.Fleet) (tearDown func() error, err error) {
	testFleet = f
	dir, err := os.MkdirTemp("", "widgethub-plugin-test-")
	if err != nil {
		return nil, err
	}
	suiteDir = dir
	tearDown = func() error { return os.RemoveAll(dir) }
	if kubeconfigs, err = f.WriteKubeconfigs(dir); err == nil {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}
		err = f.Hub.Client.Create(context.Background(), ns)
	}
	if err == nil {
		err = f.Hub.InstallClusterProfileCRD()
	}
	if err != nil {
		return nil, errors.Join(err, tearDown())
	}
	return tearDown, nil
}

var (
	buildMu sync.Mutex
	// binaries are the commands built, by package.
	binaries = map[string]string{}
)

// built returns the executable of pkg, a command of this module
// ("cmd/kubectl-widgethub"), built with go build into suiteDir the first time.
func built(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := binaries[pkg]; ok {
		return path
	}
	path := filepath.Join(suiteDir, "bin", filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", path, "github.com/widgethub/widgethub/"+pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	binaries[pkg] = path
	return path
}

// result is what one plugin invocation printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// run runs the plugin in-process against the suite's hub.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	// Later flags win: a test's own --kubeconfig or --context replaces these.
	args = append([]string{"--kubeconfig", kubeconfigs.All, "--context", "hub"}, args...)
	start := time.Now()
	code := plugin.Run(context.Background(), args, &stdout, &stderr)
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	t.Logf("kubectl widgethub %s (%s)\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), r)
	return r
}

// runBuilt runs the built kubectl-widgethub against the suite's hub, as
// kubectl runs it: its exit code is the one main passes to os.Exit.
func runBuilt(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append([]string{"--kubeconfig", kubeconfigs.All, "--context", "hub"}, args...)
	cmd := exec.Command(built(t, "cmd/kubectl-widgethub"), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("kubectl-widgethub %s: %v", strings.Join(args, " "), err)
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	t.Logf("kubectl-widgethub %s (%s)\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), r)
	return r
}

// mustRun runs the plugin and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) result {
	t.Helper()
	r := run(t, args...)
	if r.code != 0 {
		t.Fatalf("kubectl widgethub %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// join joins member (of the fleet kubeconfig) as name.
func join(t *testing.T, name, member string, extra ...string) result {
	t.Helper()
	return mustRun(t, append([]string{"join", name, "--member-context", member}, extra...)...)
}

// joinAlphaAndBeta joins alpha and beta under their own names, and unjoins
// them with --cleanup at the end of the test.
func joinAlphaAndBeta(t *testing.T) {
	t.Helper()
	for _, member := range []string{"alpha", "beta"} {
		unjoinCleanup(t, member, member)
		join(t, member, member)
	}
}

// registerForTest creates on the hub the registration Secret name with
// kubeconfig doc, deleted when the test ends.
func registerForTest(t *testing.T, name string, doc []byte) {
	t.Helper()
	ctx := context.Background()
	s := registration.NewSecret(hubNS, name, doc)
	if err := testFleet.Hub.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(ctx, s) })
}
