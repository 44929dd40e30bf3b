//go:build e2e

package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/clusters"
)

var scheme = clusters.NewScheme()

// kube is one kind cluster as the test sees it: from the host, with admin rights.
type kube struct {
	kind       string // kind cluster name
	kubeconfig string // path of its host kubeconfig
	client.Client
}

func newKube(t *testing.T, kindName, kubeconfig string) *kube {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", kindName, err)
	}
	cfg.Timeout = 10 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client for %s: %v", kindName, err)
	}
	return &kube{kind: kindName, kubeconfig: kubeconfig, Client: c}
}

// kubectl runs kubectl against the cluster.
func (k *kube) kubectl(t *testing.T, args ...string) []byte {
	t.Helper()
	return run(t, "", nil, "kubectl", append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
}

// eventually polls check every 2s until it returns nil, and fails the test
// with check's last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if err := poll(timeout, check); err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// consistently fails the test when check returns an error during period.
func consistently(t *testing.T, period time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(period)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(2 * time.Second)
	}
}

func poll(timeout time.Duration, check func(ctx context.Context) error) error {
	return pollEvery(2*time.Second, timeout, check)
}

// pollEvery calls check every interval until it returns nil or timeout passed.
func pollEvery(interval, timeout time.Duration, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}
