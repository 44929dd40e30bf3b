package members_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// A registration may only hand the hub data: every field that would make it
// read a file of its own, connect through a proxy, impersonate or skip TLS is
// refused with UnsafeKubeconfig before any request, the member named in it
// hears nothing, no file content, token or path shows in status or Events,
// and the healthy members are served meanwhile.
func TestUnsafeRegistrationsSendNothing(t *testing.T) {
	alpha := testFleet.Member("alpha")
	member := hubtest.NewRecorder(t, true)
	proxy := hubtest.NewRecorder(t, false)
	files := writeHubFiles(t, alpha, member)
	paths := files.paths()

	start := time.Now()
	hubtest.ExpectRefusedWhileServing(t, "unsafe", "unsafe registrations were refused", unsafeRegistrations(t, alpha, member, proxy, files),
		func(t *testing.T, secret string, mc *v1alpha1.MemberCluster) {
			message := hubtest.ReadyConditionOf(mc).Message
			hubtest.ExpectNoneOf(t, "status message", message, paths)
			NewWithT(t).Eventually(func(g Gomega) {
				events := hubtest.SecretEvents(g, secret)
				g.Expect(events).NotTo(BeEmpty())
				for _, e := range events {
					hubtest.ExpectNoneOf(t, "Event", e.Message, paths)
				}
			}, hubtest.Within, hubtest.Poll).Should(Succeed())
		})
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the refusals took %s; they need no request and should be reported within seconds", took)
	}
	// Retries of the refused Secrets (there are none: the errors are
	// terminal) would come within the first backoff steps; a healthy change
	// reconciled after them proves the hub had its chance to misbehave.
	hubtest.ExpectReconcilesPromptly(t, "unbothered-by-unsafe", 3)
	if c, r := member.Conns.Load(), member.Requests.Load(); c != 0 || r != 0 {
		t.Errorf("the member named by refused registrations got %d connections and %d requests, want none", c, r)
	}
	if c := proxy.Conns.Load(); c != 0 {
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

func writeHubFiles(t *testing.T, alpha *fleet.ControlPlane, member *hubtest.Recorder) hubFiles {
	t.Helper()
	f := hubFiles{dir: t.TempDir()}
	secretToken := "hub-token-" + hubtest.RandomHex(t)
	fleet.HandOver(secretToken)
	hubtest.EditKubeconfig(t, alpha.Kubeconfig, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { f.alphaUser = *u })
	f.token = hubtest.WriteFile(t, f.dir, "token", []byte(secretToken))
	f.cert = hubtest.WriteFile(t, f.dir, "tls.crt", f.alphaUser.ClientCertificateData)
	f.key = hubtest.WriteFile(t, f.dir, "tls.key", f.alphaUser.ClientKeyData)
	f.ca = hubtest.WriteFile(t, f.dir, "ca.crt", member.CAPEM())
	return f
}

// paths are the files' paths and their directory: none may show in status or Events.
func (f hubFiles) paths() []string { return []string{f.token, f.cert, f.key, f.ca, f.dir} }

// unsafeRegistrations are kubeconfigs for the recording member, each with one
// unsafe field, or too large, and the refusal each must get.
func unsafeRegistrations(t *testing.T, alpha *fleet.ControlPlane, member, proxy *hubtest.Recorder, files hubFiles) []hubtest.RefusedRegistration {
	// pointed is a kubeconfig for the recording member with a harmless token,
	// changed by edit.
	pointed := func(edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) map[string][]byte {
		return map[string][]byte{"kubeconfig": hubtest.EditKubeconfig(t, alpha.Kubeconfig, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.Server, c.CertificateAuthorityData = member.URL, member.CAPEM()
			*u = clientcmdapi.AuthInfo{Token: "harmless-" + hubtest.RandomHex(t)}
			edit(c, u)
		})}
	}
	unsafe := v1alpha1.MemberUnsafeKubeconfigReason
	return []hubtest.RefusedRegistration{
		hubtest.Refused("token-file", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.TokenFile = "", files.token
		}), []string{"tokenFile"}),
		hubtest.Refused("client-cert-files", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Token, u.ClientCertificate, u.ClientKey = "", files.cert, files.key
		}), []string{"client-certificate"}),
		hubtest.Refused("client-key-file", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificateData, u.ClientKey = files.alphaUser.ClientCertificateData, files.key
		}), []string{"client-key"}),
		hubtest.Refused("ca-file", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData, c.CertificateAuthority = nil, files.ca
		}), []string{"certificate-authority"}),
		hubtest.Refused("proxy-url", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.ProxyURL = proxy.URL
		}), []string{"proxy-url"}),
		hubtest.Refused("skip-tls-verify", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.CertificateAuthorityData, c.InsecureSkipTLSVerify = nil, true
		}), []string{"insecure-skip-tls-verify"}),
		hubtest.Refused("impersonation", unsafe, pointed(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Impersonate = "system:admin"
		}), []string{"impersonation"}),
		hubtest.Refused("plain-http", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = strings.Replace(member.URL, "https://", "http://", 1)
		}), []string{"http://"}),
		hubtest.Refused("link-local", unsafe, pointed(func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.Server = "https://169.254.169.254:443"
		}), []string{"link-local"}),
		hubtest.Refused("oversized", v1alpha1.MemberInvalidKubeconfigReason, map[string][]byte{
			"kubeconfig": append(pointed(func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {})["kubeconfig"],
				"\n#"+strings.Repeat("x", connect.MaxKubeconfigBytes)...),
		}, []string{"more than the 262144 allowed"}),
	}
}

// The same kubeconfigs pointed at the recording member are served once
// nothing unsafe is left in them: the hubtest.Recorder does count what reaches it.
func TestRecorderSeesAnAllowedRegistration(t *testing.T) {
	member := hubtest.NewRecorder(t, true)
	alpha := testFleet.Member("alpha")
	hubtest.RegisterData(t, "recorded", map[string][]byte{"kubeconfig": hubtest.EditKubeconfig(t, alpha.Kubeconfig, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.Server, c.CertificateAuthorityData = member.URL, member.CAPEM()
		*u = clientcmdapi.AuthInfo{Token: "harmless-" + hubtest.RandomHex(t)}
	})})
	NewWithT(t).Eventually(member.Requests.Load, hubtest.Within, hubtest.Poll).Should(BeNumerically(">", 0))
}

// A member registered with a token that expires within two weeks says so,
// with the expiry read from the token, and stays engaged meanwhile.
func TestExpiringTokenIsReported(t *testing.T) {
	gamma := testFleet.Member("gamma")
	hubtest.InstallMemberRole(t, gamma)
	minted := time.Now()
	token := hubtest.ServiceAccountToken(t, gamma, "widgethub-expiring", "widgethub-member")
	hubtest.RegisterData(t, "expiring", map[string][]byte{"kubeconfig": hubtest.TokenKubeconfig(t, gamma, token)})
	mc := hubtest.ExpectMemberReady(t, "expiring", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g := NewWithT(t)
	g.Expect(mc.Status.TokenExpiry).NotTo(BeNil())
	// serviceAccountToken asks for an hour.
	g.Expect(mc.Status.TokenExpiry.Time).To(BeTemporally("~", minted.Add(time.Hour), time.Minute))
	expiring := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberCredentialsExpiring)
	g.Expect(expiring).NotTo(BeNil())
	g.Expect(expiring.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(expiring.Reason).To(Equal(v1alpha1.MemberCredentialsExpiresSoonReason))
}
