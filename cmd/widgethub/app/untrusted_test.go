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
	"github.com/widgethub/widgethub/internal/fleet"
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
	files := writeHubFiles(t, alpha, member)
	paths := files.paths()

	start := time.Now()
	expectRefusedWhileServing(t, "unsafe", "unsafe registrations were refused", unsafeRegistrations(t, alpha, member, proxy, files),
		func(t *testing.T, secret string, mc *v1alpha1.MemberCluster) {
			message := readyConditionOf(mc).Message
			expectNoneOf(t, "status message", message, paths)
			NewWithT(t).Eventually(func(g Gomega) {
				events := secretEvents(g, secret)
				g.Expect(events).NotTo(BeEmpty())
				for _, e := range events {
					expectNoneOf(t, "Event", e.Message, paths)
				}
			}, eventually, poll).Should(Succeed())
		})
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

// hubFiles are files of "the hub": a service account token, alpha's admin
// client certificate and key, and the recording member's CA. Were they read,
// they would be presented to the member.
type hubFiles struct {
	dir, token, cert, key, ca string
	// alphaUser is alpha's admin user, whose certificate and key cert and key hold.
	alphaUser clientcmdapi.AuthInfo
}

func writeHubFiles(t *testing.T, alpha *fleet.ControlPlane, member *recorder) hubFiles {
	t.Helper()
	f := hubFiles{dir: t.TempDir()}
	secretToken := "hub-token-" + randomHex(t)
	credentials.add(secretToken)
	editKubeconfig(t, alpha.Kubeconfig, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { f.alphaUser = *u })
	f.token = writeFile(t, f.dir, "token", []byte(secretToken))
	f.cert = writeFile(t, f.dir, "tls.crt", f.alphaUser.ClientCertificateData)
	f.key = writeFile(t, f.dir, "tls.key", f.alphaUser.ClientKeyData)
	f.ca = writeFile(t, f.dir, "ca.crt", member.caPEM())
	return f
}

// paths are the files' paths and their directory: none may show in status or Events.
func (f hubFiles) paths() []string { return []string{f.token, f.cert, f.key, f.ca, f.dir} }

// unsafeRegistrations are kubeconfigs for the recording member, each with one
// unsafe field, or too large, and the refusal each must get.
func unsafeRegistrations(t *testing.T, alpha *fleet.ControlPlane, member, proxy *recorder, files hubFiles) []refusedRegistration {
	// pointed is a kubeconfig for the recording member with a harmless token,
	// changed by edit.
	pointed := func(edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) map[string][]byte {
		return map[string][]byte{"kubeconfig": editKubeconfig(t, alpha.Kubeconfig, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.Server, c.CertificateAuthorityData = member.URL, member.caPEM()
			*u = clientcmdapi.AuthInfo{Token: "harmless-" + randomHex(t)}
			edit(c, u)
		})}
	}
	unsafe := v1alpha1.MemberUnsafeKubeconfigReason
	return []refusedRegistration{
		{"token-file", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.TokenFile = "", files.token
		}), []string{"tokenFile"}},
		{"client-cert-files", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.ClientCertificate, u.ClientKey = "", files.cert, files.key
		}), []string{"client-certificate"}},
		{"client-key-file", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificateData, u.ClientKey = files.alphaUser.ClientCertificateData, files.key
		}), []string{"client-key"}},
		{"ca-file", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData, c.CertificateAuthority = nil, files.ca
		}), []string{"certificate-authority"}},
		{"proxy-url", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.ProxyURL = proxy.URL
		}), []string{"proxy-url"}},
		{"skip-tls-verify", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData, c.InsecureSkipTLSVerify = nil, true
		}), []string{"insecure-skip-tls-verify"}},
		{"impersonation", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Impersonate = "system:admin"
		}), []string{"impersonation"}},
		{"plain-http", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = strings.Replace(member.URL, "https://", "http://", 1)
		}), []string{"http://"}},
		{"link-local", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = "https://169.254.169.254:443"
		}), []string{"link-local"}},
		{"oversized", v1alpha1.MemberInvalidKubeconfigReason, map[string][]byte{
			"kubeconfig": append(pointed(func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {})["kubeconfig"],
				"\n#"+strings.Repeat("x", clusters.MaxKubeconfigBytes)...),
		}, []string{"more than the 262144 allowed"}},
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
	expiring := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberCredentialsExpiring)
	g.Expect(expiring).NotTo(BeNil())
	g.Expect(expiring.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(expiring.Reason).To(Equal(v1alpha1.MemberCredentialsExpiresSoonReason))
}
