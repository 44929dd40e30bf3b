//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// kindConfig is the configuration of every cluster: one node; kubelet
// allowed on cgroup v1 hosts; with our node image, its own CNI config (ptp)
// instead of kindnetd, which is not in it. The node image itself comes from
// CreateWithNodeImage.
func kindConfig(nodeImage string) []byte {
	ownImage := strings.HasPrefix(nodeImage, "widgethub/kind-node:")
	return fmt.Appendf(nil, `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: %t
kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
nodes:
  - role: control-plane
`, ownImage)
}

func newProvider() *cluster.Provider {
	return cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(stderrLogger{}))
}

// ensureCluster creates the kind cluster name from image, or reuses it when
// it exists and reuse is set; an existing cluster is otherwise replaced. It
// writes the cluster's kubeconfig (host address) into dir and returns its path.
func ensureCluster(t *testing.T, p *cluster.Provider, name, image string, reuse bool, dir string) string {
	t.Helper()
	existing, err := p.List()
	if err != nil {
		t.Fatalf("list kind clusters: %v", err)
	}
	switch {
	case slices.Contains(existing, name) && reuse:
		logf("reusing kind cluster %s", name)
	default:
		if slices.Contains(existing, name) {
			logf("deleting stale kind cluster %s", name)
			if err := p.Delete(name, kindKubeconfig(dir)); err != nil {
				t.Fatalf("delete kind cluster %s: %v", name, err)
			}
		}
		logf("creating kind cluster %s from %s", name, image)
		start := time.Now()
		err := p.Create(name,
			cluster.CreateWithRawConfig(kindConfig(image)),
			cluster.CreateWithNodeImage(image),
			cluster.CreateWithWaitForReady(createTimeout),
			cluster.CreateWithKubeconfigPath(kindKubeconfig(dir)),
			cluster.CreateWithDisplayUsage(false),
			cluster.CreateWithDisplaySalutation(false),
		)
		if err != nil {
			t.Fatalf("create kind cluster %s: %v", name, err)
		}
		logf("kind cluster %s up in %s", name, time.Since(start).Round(time.Second))
	}
	kc, err := p.KubeConfig(name, false)
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kindKubeconfig is the kubeconfig kind itself updates on create and delete
// (instead of the user's ~/.kube/config).
func kindKubeconfig(dir string) string { return filepath.Join(dir, "kind.kubeconfig") }

// deleteClusters deletes the kind clusters, reporting failures without failing.
func deleteClusters(t *testing.T, p *cluster.Provider, dir string, names ...string) {
	for _, name := range names {
		logf("deleting kind cluster %s", name)
		if err := p.Delete(name, kindKubeconfig(dir)); err != nil {
			t.Logf("delete kind cluster %s: %v", name, err)
		}
	}
}

// loadImage copies the local Docker image into the containerd of every node
// of the kind cluster, like `kind load docker-image`.
func loadImage(t *testing.T, p *cluster.Provider, clusterName, image string) {
	t.Helper()
	nodes, err := p.ListInternalNodes(clusterName)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("nodes of %s: %v (%d nodes)", clusterName, err, len(nodes))
	}
	for _, node := range nodes {
		save := exec.Command("docker", "save", image)
		var stderr bytes.Buffer
		save.Stderr = &stderr
		out, err := save.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := save.Start(); err != nil {
			t.Fatalf("docker save %s: %v", image, err)
		}
		loadErr := nodeutils.LoadImageArchive(node, out)
		if err := save.Wait(); err != nil {
			t.Fatalf("docker save %s: %v: %s", image, err, stderr.String())
		}
		if loadErr != nil {
			t.Fatalf("load %s into %s: %v", image, node, loadErr)
		}
		id, err := nodeutils.ImageID(node, image)
		if err != nil {
			t.Fatalf("image %s not found in %s after loading: %v", image, node, err)
		}
		logf("loaded %s into %s (%s)", image, node, id)
	}
}

// nodeContainer is the Docker container of a single-node kind cluster.
func nodeContainer(clusterName string) string { return clusterName + "-control-plane" }

// docker runs the docker CLI (stopping and starting node containers is not in
// kind's library).
func docker(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// run runs a command from dir with its output in the test log, failing the test on error.
func run(t *testing.T, dir string, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// logf prints progress at once, with a time stamp (t.Logf of the top-level
// test is only printed when it ends).
func logf(format string, args ...any) {
	logMu.Lock()
	defer logMu.Unlock()
	fmt.Fprintf(os.Stderr, "%s e2e: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

var logMu sync.Mutex

// stderrLogger is kind's logger: its user-facing messages go to stderr.
type stderrLogger struct{}

func (stderrLogger) Warn(m string)                        { logf("kind: %s", m) }
func (stderrLogger) Warnf(f string, a ...any)             { logf("kind: "+f, a...) }
func (stderrLogger) Error(m string)                       { logf("kind: %s", m) }
func (stderrLogger) Errorf(f string, a ...any)            { logf("kind: "+f, a...) }
func (stderrLogger) V(l kindlog.Level) kindlog.InfoLogger { return infoLogger(l <= 0) }

type infoLogger bool

func (i infoLogger) Info(m string) {
	if i {
		logf("kind: %s", strings.TrimSpace(m))
	}
}

func (i infoLogger) Infof(f string, a ...any) {
	if i {
		logf("kind: "+strings.TrimSpace(f), a...)
	}
}

func (i infoLogger) Enabled() bool { return bool(i) }
