package app_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// The manager answers the kubelet's probes of config/manager/manager.yaml:
// /healthz (liveness) and /readyz (readiness) on --health-probe-bind-address,
// 200 "ok" once it runs, with the checks by name on ?verbose.
func TestManagerAnswersItsHealthProbes(t *testing.T) {
	g := NewWithT(t)
	paths := probePaths(t)
	g.Expect(paths).To(Equal(map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"}))

	dir := t.TempDir()
	bin := buildManager(t)
	ns := "widgethub-probes"
	hubtest.EnsureNamespace(t, testFleet.Hub, ns)
	kubeconfig := filepath.Join(dir, "hub.kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, testFleet.Hub.Kubeconfig, 0o600)).To(Succeed())
	addr, err := fleet.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	started := time.Now()
	startManagerProcess(t, bin, dir, "probes", []string{"--kubeconfig=" + kubeconfig, "--registration-namespace=" + ns,
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=" + addr})

	get := func(g Gomega, path string) (int, string) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + path)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		g.Eventually(func(g Gomega) {
			code, body := get(g, path)
			g.Expect(code).To(Equal(http.StatusOK), "%s: %s", path, body)
			g.Expect(body).To(Equal("ok"))
		}, hubtest.Within, hubtest.Poll).Should(Succeed(), "%s of the manager", path)
		code, body := get(g, path+"?verbose")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring("[+]ping ok"), "%s?verbose", path)
	}
	t.Logf("/healthz and /readyz answered 200 within %s of the start", time.Since(started).Round(10*time.Millisecond))
	code, _ := get(g, "/healthz/no-such-check")
	g.Expect(code).To(Equal(http.StatusNotFound), "a check the manager does not have")
}

// probePaths returns, by probe, the HTTP paths of the manager container's
// probes in config/manager/manager.yaml, each on the port named probes.
func probePaths(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "config/manager/manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var paths map[string]string
	for _, doc := range strings.Split(string(data), "\n---") {
		var deploy struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []map[string]any `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &deploy); err != nil {
			t.Fatal(err)
		}
		if deploy.Kind != "Deployment" {
			continue
		}
		paths = map[string]string{}
		for _, c := range deploy.Spec.Template.Spec.Containers {
			for _, probe := range []string{"livenessProbe", "readinessProbe"} {
				spec, _ := c[probe].(map[string]any)
				get, _ := spec["httpGet"].(map[string]any)
				if get["port"] != "probes" {
					t.Errorf("%s on port %v, want the port named probes", probe, get["port"])
				}
				paths[probe], _ = get["path"].(string)
			}
		}
	}
	return paths
}
