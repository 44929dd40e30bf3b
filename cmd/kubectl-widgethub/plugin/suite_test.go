package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
)

// asPluginEnv makes the test binary run as kubectl-widgethub (completion_test.go).
const asPluginEnv = "WIDGETHUB_TEST_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPluginEnv) == "1" {
		os.Exit(plugin.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	opts := fleet.Options{Members: []string{"alpha", "beta"}, Scheme: clusters.NewScheme(), MemberCRDs: []string{}}
	os.Exit(fleet.RunTests(m, opts, setUpSuite))
}

// setUpSuite writes the fleet's kubeconfig files and the hub's registration
// namespace; the files go when the tests end.
func setUpSuite(f *fleet.Fleet) (tearDown func() error, err error) {
	testFleet = f
	dir, err := os.MkdirTemp("", "widgethub-plugin-test-")
	if err != nil {
		return nil, err
	}
	tearDown = func() error { return os.RemoveAll(dir) }
	if kubeconfigs, err = f.WriteKubeconfigs(dir); err == nil {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}
		err = f.Hub.Client.Create(context.Background(), ns)
	}
	if err != nil {
		return nil, errors.Join(err, tearDown())
	}
	return tearDown, nil
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
