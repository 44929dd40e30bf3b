package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// TestMetricsServedOnlyToTheMetricsReader runs the manager as config/rbac
// makes it (its ServiceAccount, Role and ClusterRole, with --metrics-secure
// on by default) and scrapes it with tokens the hub minted: the hub's
// TokenReview and SubjectAccessReview decide, so no token is refused (401),
// a ServiceAccount without widgethub-metrics-reader is forbidden (403), and
// one bound to it reads the metrics.
func TestMetricsServedOnlyToTheMetricsReader(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	addr, managerToken, manager := startSecureMetricsManager(t, "metrics-auth")
	readerToken := hubtest.ServiceAccountToken(t, testFleet.Hub, "metrics-reader", "widgethub-metrics-reader")
	strangerToken := hubtest.ServiceAccountToken(t, testFleet.Hub, "metrics-stranger", "")

	// The certificate is self-signed, as kubebuilder's default ServiceMonitor
	// expects (insecureSkipVerify); HTTP/2 is offered and must be declined.
	httpClient := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the metrics server's self-signed certificate
		ForceAttemptHTTP2: true,
	}}
	t.Cleanup(httpClient.CloseIdleConnections)
	get := func(g Gomega, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.ProtoMajor).To(Equal(1), "HTTP/2 is not served")
		return resp.StatusCode, string(body)
	}

	// Plain HTTP is refused once the manager listens.
	NewWithT(t).Eventually(func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "the metrics server listens")
	expectPlainHTTPRefused(t, addr)

	// The reader is served.
	var body string
	g.Eventually(func(g Gomega) {
		var code int
		code, body = get(g, readerToken)
		g.Expect(code).To(Equal(http.StatusOK), "the metrics reader is served: %s", body)
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	e, err := parseExposition(strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.types).To(HaveKeyWithValue("widgethub_workqueue_depth", "gauge"))
	_, ok := e.value("widgethub_workqueue_depth", "name", "widget")
	g.Expect(ok).To(BeTrue(), "widgethub_workqueue_depth{name=\"widget\"} is served")

	for _, c := range []struct {
		what, token string
		code        int
	}{
		{"no token", "", http.StatusUnauthorized},
		// controller-runtime v0.24.1's filter answers a token the TokenReview
		// rejects with a 500 (and an error log line), not a 401.
		{"a token the hub did not issue", "not-a-token", http.StatusInternalServerError},
		{"a ServiceAccount without widgethub-metrics-reader", strangerToken, http.StatusForbidden},
	} {
		code, body := get(g, c.token)
		g.Expect(code).To(Equal(c.code), "%s: %s", c.what, body)
		g.Expect(body).NotTo(ContainSubstring("widgethub_"), "%s is served metrics", c.what)
	}
	expectPlainHTTPRefused(t, addr)
	// The reader again: the refusals changed nothing.
	code, body := get(g, readerToken)
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring("widgethub_workqueue_"))

	for _, token := range []string{managerToken, readerToken, strangerToken} {
		g.Expect(manager.Log()).NotTo(ContainSubstring(token), "the manager logs a token")
	}
}

// expectPlainHTTPRefused fails t unless a plain HTTP request for /metrics
// at addr is refused as Go's TLS server refuses one: a 400 without metrics,
// or the connection reset before the answer is read. Any other error fails
// too: a refused or timed-out connection says nothing about plain HTTP.
func expectPlainHTTPRefused(t *testing.T, addr string) {
	t.Helper()
	c := &http.Client{Timeout: 15 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("plain HTTP to the metrics server: %v; want a 400 or a reset connection", err)
		}
		t.Logf("plain HTTP: the connection was reset before the answer was read: %v", err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "widgethub_") {
		t.Fatalf("plain HTTP to the metrics server: %d %.200q (read error %v); want a 400 without metrics", resp.StatusCode, body, err)
	}
}

// startSecureMetricsManager starts the manager as a process that
// authenticates to the hub as config/rbac's ServiceAccount, with its Role
// and ClusterRoles, serving secure metrics (the default) on the address it
// returns with the ServiceAccount's token; args are added to its flags.
func startSecureMetricsManager(t *testing.T, name string, args ...string) (addr, token string, p *managerProcess) {
	t.Helper()
	const ns = "widgethub-metrics-auth"
	dir := t.TempDir()
	bin := buildManager(t)
	hub := testFleet.Hub
	hubtest.EnsureNamespace(t, hub, ns)
	installHubRBAC(t, hub, ns)
	token = hubtest.MintToken(t, hub, ns, "widgethub")
	kubeconfig := filepath.Join(dir, "hub.kubeconfig")
	if err := os.WriteFile(kubeconfig, hubtest.TokenKubeconfig(t, hub, token), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, err := fleet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p = startManagerProcess(t, bin, dir, name, append([]string{"--kubeconfig=" + kubeconfig,
		"--registration-namespace=" + ns, "--leader-elect=false", "--metrics-bind-address=" + addr, "--health-probe-bind-address=0"}, args...))
	return addr, token, p
}

// installHubRBAC applies the resources of config/rbac to the hub, in
// namespace ns instead of widgethub-system (as kustomize's namespace
// transformer would): the manager's ServiceAccount, its Role and
// RoleBinding, its ClusterRole and the ClusterRoleBinding to it, and
// widgethub-metrics-reader.
func installHubRBAC(t *testing.T, cp *fleet.ControlPlane, ns string) {
	t.Helper()
	dir := filepath.Join(fleet.CRDPaths()[0], "..", "..", "rbac")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		t.Fatal(err)
	}
	if len(kustomization.Resources) == 0 {
		t.Fatal("config/rbac/kustomization.yaml lists no resources")
	}
	ctx := context.Background()
	for _, file := range kustomization.Resources {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("config/rbac/%s: %v", file, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			inNamespace(t, u, ns)
			if err := cp.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("widgethub-test"), client.ForceOwnership); err != nil {
				t.Fatalf("apply %s %s of config/rbac/%s: %v", u.GetKind(), u.GetName(), file, err)
			}
		}
	}
}

// inNamespace moves u, and the ServiceAccounts a binding names, to ns.
func inNamespace(t *testing.T, u *unstructured.Unstructured, ns string) {
	t.Helper()
	switch u.GetKind() {
	case "ServiceAccount", "Role":
		u.SetNamespace(ns)
	case "RoleBinding", "ClusterRoleBinding":
		if u.GetKind() == "RoleBinding" {
			u.SetNamespace(ns)
		}
		subjects, _, err := unstructured.NestedSlice(u.Object, "subjects")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subjects {
			if s := s.(map[string]any); s["kind"] == rbacv1.ServiceAccountKind {
				s["namespace"] = ns
			}
		}
		if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
			t.Fatal(err)
		}
	case "ClusterRole":
	default:
		t.Fatalf("config/rbac has a %s: say here how it moves to another namespace", u.GetKind())
	}
}

// servingCert is a serving certificate for 127.0.0.1 written to a directory
// as --metrics-cert-path reads it, and the roots that verify it.
type servingCert struct {
	leaf  *x509.Certificate
	roots *x509.CertPool
}

// writeServingCert makes a new serving certificate and writes it to dir.
func writeServingCert(t *testing.T, dir string) servingCert {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	for name, data := range map[string][]byte{"tls.key": keyPEM, "tls.crt": certPEM} {
		// Each file replaced at once, as a Secret volume's are.
		if err := os.WriteFile(filepath.Join(dir, name+".new"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".new"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return servingCert{leaf: certs[0], roots: roots}
}

// TestMetricsServedWithTheGivenCertificate: with --metrics-cert-path the
// metrics server presents the certificate of that directory, which a
// scraper verifies, and the one that replaces it there without a restart.
func TestMetricsServedWithTheGivenCertificate(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	certDir := t.TempDir()
	first := writeServingCert(t, certDir)
	addr, _, _ := startSecureMetricsManager(t, "metrics-cert", "--metrics-cert-path="+certDir)
	readerToken := hubtest.ServiceAccountToken(t, testFleet.Hub, "metrics-reader", "widgethub-metrics-reader")

	// served scrapes with a client that trusts roots only, and returns the
	// certificate the server presented.
	served := func(g Gomega, roots *x509.CertPool) *x509.Certificate {
		transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
		defer transport.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+readerToken)
		resp, err := (&http.Client{Transport: transport, Timeout: 15 * time.Second}).Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", body)
		g.Expect(string(body)).To(ContainSubstring("widgethub_workqueue_"))
		return resp.TLS.PeerCertificates[0]
	}
	g.Eventually(func(g Gomega) {
		g.Expect(served(g, first.roots).Equal(first.leaf)).To(BeTrue(), "the certificate of --metrics-cert-path is served")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	rotated := time.Now()
	second := writeServingCert(t, certDir)
	g.Eventually(func(g Gomega) {
		g.Expect(served(g, second.roots).Equal(second.leaf)).To(BeTrue(), "the replaced certificate is served")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	t.Logf("the replaced certificate served after %s", time.Since(rotated).Round(10*time.Millisecond))
}

// TestMetricsCertPathMustHoldTheCertificate: controller-runtime would serve
// a self-signed certificate in place of missing files; the manager refuses
// to start instead, and refuses the flag without HTTPS.
func TestMetricsCertPathMustHoldTheCertificate(t *testing.T) {
	for _, c := range []struct {
		what   string
		secure bool
		files  []string
	}{
		{"no files", true, nil},
		{"no key", true, []string{"tls.crt"}},
		{"plain HTTP", false, []string{"tls.crt", "tls.key"}},
	} {
		dir := t.TempDir()
		for _, name := range c.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		opts := managerOptions()
		opts.MetricsBindAddress, opts.MetricsSecure, opts.MetricsCertPath = "127.0.0.1:0", c.secure, dir
		if _, err := app.New(testFleet.Hub.Config, opts); err == nil || !strings.Contains(err.Error(), "--metrics-cert-path") {
			t.Errorf("%s: app.New with --metrics-cert-path=%s: %v, want an error naming the flag", c.what, dir, err)
		}
	}
}
