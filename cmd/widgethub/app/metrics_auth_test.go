package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/widgethub/widgethub/internal/fleet"
)

// TestMetricsServedOnlyToTheMetricsReader runs the manager as config/rbac
// makes it (its ServiceAccount, Role and ClusterRole, with --metrics-secure
// on by default) and scrapes it with tokens the hub minted: the hub's
// TokenReview and SubjectAccessReview decide, so no token is refused (401),
// a ServiceAccount without widgethub-metrics-reader is forbidden (403), and
// one bound to it reads the metrics.
func TestMetricsServedOnlyToTheMetricsReader(t *testing.T) {
	const ns = "widgethub-metrics-auth"
	ctx := context.Background()
	dir := t.TempDir()
	bin := buildManager(t, dir)
	g := NewWithT(t)
	hub := testFleet.Hub
	ensureNamespace(t, hub, ns)
	installHubRBAC(t, hub, ns)

	// The manager authenticates to the hub as its ServiceAccount.
	managerToken := mintToken(t, hub, ns, "widgethub")
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	g.Expect(os.WriteFile(hubKubeconfig, tokenKubeconfig(t, hub, managerToken), 0o600)).To(Succeed())
	readerToken := serviceAccountToken(t, hub, "metrics-reader", "widgethub-metrics-reader")
	strangerToken := serviceAccountToken(t, hub, "metrics-stranger", "")

	addr, err := fleet.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	manager := startManagerProcess(t, bin, dir, "metrics-auth", []string{"--kubeconfig=" + hubKubeconfig,
		"--registration-namespace=" + ns, "--leader-elect=false", "--metrics-bind-address=" + addr, "--health-probe-bind-address=0"})

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

	// The reader is served once the manager listens.
	var body string
	g.Eventually(func(g Gomega) {
		var code int
		code, body = get(g, readerToken)
		g.Expect(code).To(Equal(http.StatusOK), "the metrics reader is served: %s", body)
	}, eventually, poll).Should(Succeed())
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
	// Plain HTTP is not served: Go's TLS server answers it with a 400 and
	// closes the connection, which may be reset before the answer is read.
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP: %s", body)
		g.Expect(string(body)).NotTo(ContainSubstring("widgethub_"), "plain HTTP is served metrics")
	}
	// The reader again: the refusals changed nothing.
	code, body := get(g, readerToken)
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring("widgethub_workqueue_"))

	for _, token := range []string{managerToken, readerToken, strangerToken} {
		g.Expect(manager.Log()).NotTo(ContainSubstring(token), "the manager logs a token")
	}
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

// mintToken is a token of the ServiceAccount ns/name, from the TokenRequest API.
func mintToken(t *testing.T, cp *fleet.ControlPlane, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = ns, name
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := cp.Client.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("mint a token for %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}
