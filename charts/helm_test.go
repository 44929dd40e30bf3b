package charts_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/widgethub/widgethub/internal/manifests"
)

// chartDir is the chart, relative to this package.
const chartDir = "widgethub"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary is $HELM (make test sets it), or else what hack/helm.sh builds
// into the tools cache (once).
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if helmPath = os.Getenv("HELM"); helmPath != "" {
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("../hack/helm.sh")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = errors.New("hack/helm.sh: " + err.Error() + "\n" + stderr.String())
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// helm runs the Helm CLI with a home of its own (no user config or repos).
func helm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// mustHelm runs helm and fails t unless it succeeds.
func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// decode splits a multi-document YAML stream into objects.
func decode(t *testing.T, manifestsYAML string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Decode([]byte(manifestsYAML))
	if err != nil {
		t.Fatalf("decode manifests: %v", err)
	}
	return objs
}

// template renders the chart as release widgethub in widgethub-system, CRDs included.
func template(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return decode(t, mustHelm(t, append([]string{"template", "widgethub", chartDir, "--namespace", "widgethub-system", "--include-crds"}, args...)...))
}

// kustomize renders config/default with image, as make deploy does (hack/render.sh).
func kustomize(t *testing.T, image string) []*unstructured.Unstructured {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatalf("kubectl is not on PATH: %v", err)
	}
	objs, err := manifests.Render("../hack/render.sh", image)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
