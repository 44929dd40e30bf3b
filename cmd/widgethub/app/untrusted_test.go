package app_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

// recorder is a server that counts every connection and request it gets: a
// member that must never be contacted.
type recorder struct {
	*httptest.Server
	conns, requests atomic.Int64
}

func newRecorder(t *testing.T, tls bool) *recorder {
	r := &recorder{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.requests.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	r.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	if tls {
		r.StartTLS()
	} else {
		r.Start()
	}
	t.Cleanup(r.Close)
	return r
}

// caPEM is the PEM of the recorder's certificate, so that a kubeconfig that
// was allowed to connect would pass TLS verification.
func (r *recorder) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate().Raw})
}

// A registration may only hand the hub data: every field that would make it
// read a file of its own, connect through a proxy, impersonate or skip TLS is
// refused with UnsafeKubeconfig before any request, the member named in it
// hears nothing, no file content, token or path shows in status or Events,
// and the healthy members are served meanwhile.
func TestUnsafeRegistrationsSendNothing(t *testing.T) {
	alpha := testFleet.Member("alpha")
	member := newRecorder(t, true)
	proxy := newRecorder(t, false)

	// Files of "the hub": a service account token, and alpha's admin client
	// certificate and key. Were they read, they would be presented to member.
	dir := t.TempDir()
	secretToken := "hub-token-" + randomHex(t)
	credentials.add(secretToken)
	var alphaUser clientcmdapi.AuthInfo
	editKubeconfig(t, alpha.Kubeconfig, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { alphaUser = *u })
	tokenPath := writeFile(t, dir, "token", []byte(secretToken))
	certPath := writeFile(t, dir, "tls.crt", alphaUser.ClientCertificateData)
	keyPath := writeFile(t, dir, "tls.key", alphaUser.ClientKeyData)
	caPath := writeFile(t, dir, "ca.crt", member.caPEM())
	paths := []string{tokenPath, certPath, keyPath, caPath, dir}

	// pointed is a kubeconfig for the recording member with a harmless token,
	// changed by edit.
	pointed := func(edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) map[string][]byte {
		return map[string][]byte{"kubeconfig": editKubeconfig(t, alpha.Kubeconfig, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.Server, c.CertificateAuthorityData = member.URL, member.caPEM()
			*u = clientcmdapi.AuthInfo{Token: "harmless-" + randomHex(t)}
			edit(c, u)
		})}
	}
	cases := []struct {
		name, reason, field string
		data                map[string][]byte
	}{
		{"token-file", v1alpha1.MemberUnsafeKubeconfigReason, "tokenFile", pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.TokenFile = "", tokenPath
		})},
		{"client-cert-files", v1alpha1.MemberUnsafeKubeconfigReason, "client-certificate", pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.ClientCertificate, u.ClientKey = "", certPath, keyPath
		})},
		{"client-key-file", v1alpha1.MemberUnsafeKubeconfigReason, "client-key", pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificateData, u.ClientKey = alphaUser.ClientCertificateData, keyPath
		})},
		{"ca-file", v1alpha1.MemberUnsafeKubeconfigReason, "certificate-authority", pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData, c.CertificateAuthority = nil, caPath
		})},
		{"proxy-url", v1alpha1.MemberUnsafeKubeconfigReason, "proxy-url", pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.ProxyURL = proxy.URL
		})},
		{"skip-tls-verify", v1alpha1.MemberUnsafeKubeconfigReason, "insecure-skip-tls-verify", pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData, c.InsecureSkipTLSVerify = nil, true
		})},
		{"impersonation", v1alpha1.MemberUnsafeKubeconfigReason, "impersonation", pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Impersonate = "system:admin"
		})},
		{"plain-http", v1alpha1.MemberUnsafeKubeconfigReason, "http://", pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = strings.Replace(member.URL, "https://", "http://", 1)
		})},
		{"link-local", v1alpha1.MemberUnsafeKubeconfigReason, "link-local", pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = "https://169.254.169.254:443"
		})},
		{"oversized", v1alpha1.MemberInvalidKubeconfigReason, "more than the 262144 allowed", map[string][]byte{
			"kubeconfig": append(pointed(func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {})["kubeconfig"],
				"\n#"+strings.Repeat("x", clusters.MaxKubeconfigBytes)...),
		}},
	}
	start := time.Now()
	for _, tc := range cases {
		registerData(t, "unsafe-"+tc.name, tc.data)
	}
	took := expectReconcilesPromptly(t, "unbothered-by-unsafe", 2)
	t.Logf("healthy member reconciled a change in %s while unsafe registrations were refused", took)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mc := expectMemberReady(t, "unsafe-"+tc.name, metav1.ConditionFalse, tc.reason, tc.field)
			message := readyConditionOf(mc).Message
			expectNoneOf(t, "status message", message, paths)
			NewWithT(t).Eventually(func(g Gomega) {
				events := secretEvents(g, "unsafe-"+tc.name)
				g.Expect(events).NotTo(BeEmpty())
				for _, e := range events {
					expectNoneOf(t, "Event", e.Message, paths)
				}
			}, eventually, poll).Should(Succeed())
		})
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the refusals took %s; they need no request and should be reported within seconds", took)
	}
	// Retries of the refused Secrets (there are none: the errors are
	// terminal) would come within the first backoff steps; a healthy change
	// reconciled after them proves the hub had its chance to misbehave.
	expectReconcilesPromptly(t, "unbothered-by-unsafe", 3)
	if c, r := member.conns.Load(), member.requests.Load(); c != 0 || r != 0 {
		t.Errorf("the member named by refused registrations got %d connections and %d requests, want none", c, r)
	}
	if c := proxy.conns.Load(); c != 0 {
		t.Errorf("the proxy named by a refused registration got %d connections, want none", c)
	}
}

// The same kubeconfigs pointed at the recording member are served once
// nothing unsafe is left in them: the recorder does count what reaches it.
func TestRecorderSeesAnAllowedRegistration(t *testing.T) {
	member := newRecorder(t, true)
	alpha := testFleet.Member("alpha")
	registerData(t, "recorded", map[string][]byte{"kubeconfig": editKubeconfig(t, alpha.Kubeconfig, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.Server, c.CertificateAuthorityData = member.URL, member.caPEM()
		*u = clientcmdapi.AuthInfo{Token: "harmless-" + randomHex(t)}
	})})
	NewWithT(t).Eventually(member.requests.Load, eventually, poll).Should(BeNumerically(">", 0))
}

func expectNoneOf(t *testing.T, what, text string, values []string) {
	t.Helper()
	for _, v := range values {
		if strings.Contains(text, v) {
			t.Errorf("%s quotes %q: %s", what, v, text)
		}
	}
	if leaked := credentials.foundIn(text); len(leaked) > 0 {
		t.Errorf("%s reveals a credential: %s", what, text)
	}
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A member registered with a token that expires within two weeks says so,
// with the expiry read from the token, and stays engaged meanwhile.
func TestExpiringTokenIsReported(t *testing.T) {
	gamma := testFleet.Member("gamma")
	installMemberRole(t, gamma)
	minted := time.Now()
	token := serviceAccountToken(t, gamma, "widgethub-expiring", "widgethub-member")
	registerData(t, "expiring", map[string][]byte{"kubeconfig": tokenKubeconfig(t, gamma, token)})
	mc := expectMemberReady(t, "expiring", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g := NewWithT(t)
	g.Expect(mc.Status.TokenExpiry).NotTo(BeNil())
	// serviceAccountToken asks for an hour.
	g.Expect(mc.Status.TokenExpiry.Time).To(BeTemporally("~", minted.Add(time.Hour), time.Minute))
	expiring := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberTokenExpiring)
	g.Expect(expiring).NotTo(BeNil())
	g.Expect(expiring.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(expiring.Reason).To(Equal(v1alpha1.MemberTokenExpiresSoonReason))
}
