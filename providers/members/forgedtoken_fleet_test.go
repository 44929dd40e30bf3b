//go:build scenarios

package members_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// forger is a TLS front to a real member that answers every TokenRequest
// with the member's token re-dated: the same claims, but issued and expired
// age ago (the signature is the member's, over other claims: the hub does not
// verify tokens, the member would refuse it). The requests that carry such a
// token reach the member with the real one in its place, so that the member
// keeps working with the forged tokens and only their claims lie.
type forger struct {
	*httptest.Server
	age time.Duration

	mu sync.Mutex
	// real maps each forged token to the member's.
	real map[string]string
	// tokenRequests counts the TokenRequests forwarded.
	tokenRequests atomic.Int64
}

func newForger(t *testing.T, member *fleet.ControlPlane, age time.Duration) *forger {
	t.Helper()
	target, err := url.Parse(member.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(member.Config.CAData) {
		t.Fatal("no CA certificate in the member's config")
	}
	f := &forger{age: age, real: map[string]string{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			if token, ok := strings.CutPrefix(pr.Out.Header.Get("Authorization"), "Bearer "); ok {
				f.mu.Lock()
				if real, ok := f.real[token]; ok {
					pr.Out.Header.Set("Authorization", "Bearer "+real)
				}
				f.mu.Unlock()
			}
			if pr.Out.Method == http.MethodPost && strings.HasSuffix(pr.Out.URL.Path, "/token") {
				f.tokenRequests.Add(1)
				// An answer forge can read, whatever the hub prefers.
				pr.Out.Header.Set("Accept", "application/json")
				pr.Out.Header.Del("Accept-Encoding")
			}
		},
		Transport:      &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
		ModifyResponse: f.forge,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			t.Logf("forger: %v", err)
			w.WriteHeader(http.StatusBadGateway)
		},
		FlushInterval: -1,
	}
	f.Server = httptest.NewTLSServer(proxy)
	t.Cleanup(func() {
		f.CloseClientConnections()
		f.Close()
	})
	return f
}

func pemOf(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// forge re-dates the token of a TokenRequest's answer.
func (f *forger) forge(resp *http.Response) error {
	if resp.Request.Method != http.MethodPost || !strings.HasSuffix(resp.Request.URL.Path, "/token") || resp.StatusCode != http.StatusCreated {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	tr := &authenticationv1.TokenRequest{}
	if err := json.Unmarshal(body, tr); err != nil {
		return err
	}
	real := tr.Status.Token
	forged, err := redated(real, -f.age)
	if err != nil {
		return err
	}
	fleet.HandOver(real)
	fleet.HandOver(forged)
	f.mu.Lock()
	f.real[forged] = real
	f.mu.Unlock()
	tr.Status.Token = forged
	tr.Status.ExpirationTimestamp = metav1.NewTime(tr.Status.ExpirationTimestamp.Add(-f.age))
	if body, err = json.Marshal(tr); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// redated is the JWT token with its iat, nbf and exp moved by shift; its
// signature is left as it was.
func redated(token string, shift time.Duration) (string, error) {
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	claims := map[string]any{}
	if err := dec.Decode(&claims); err != nil {
		return "", err
	}
	for _, c := range []string{"iat", "nbf", "exp"} {
		if n, ok := claims[c].(json.Number); ok {
			v, err := n.Int64()
			if err != nil {
				return "", err
			}
			claims[c] = v + int64(shift/time.Second)
		}
	}
	if payload, err = json.Marshal(claims); err != nil {
		return "", err
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, "."), nil
}

// A member whose every new token claims to be ten days old gets a renewal
// on the hub's schedule (each one 12 s after the hub asked for the last, in
// this suite) and no more, however due its tokens look; the member stays
// Ready and CredentialsExpiring reports the implausible claims, without a
// token in the message. The registration Secret's writes are counted from a
// watch of the hub's API server.
func TestForgedTokenClaimsAreRenewedOnTheHubsClock(t *testing.T) {
	g := NewWithT(t)
	member, _ := renewMember(t, renewShared)
	front := newForger(t, member, 10*24*time.Hour)
	const name = "forger"
	secret := joinRenewable(t, renewShared, name)
	// Through the front: the member's server, seen through a TLS front of its own.
	secret.Data[registration.SecretKey] = hubtest.EditKubeconfig(t, secret.Data[registration.SecretKey], func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.Server = front.URL
		c.CertificateAuthorityData = pemOf(front.Certificate())
	})
	g.Expect(testFleet.Hub.Client.Update(context.Background(), secret)).To(Succeed())
	hubtest.ExpectMemberReady(t, name, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	// Every write of the registration that changes its kubeconfig.
	hub, err := kubernetes.NewForConfig(testFleet.Hub.Config)
	g.Expect(err).NotTo(HaveOccurred())
	w, err := hub.CoreV1().Secrets(hubNS).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: secret.ResourceVersion})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var mu sync.Mutex
	var rewrites []time.Time
	go func() {
		last := secret.Data[registration.SecretKey]
		for e := range w.ResultChan() {
			s, ok := e.Object.(*corev1.Secret)
			if !ok || e.Type != watch.Modified || bytes.Equal(s.Data[registration.SecretKey], last) {
				continue
			}
			last = s.Data[registration.SecretKey]
			mu.Lock()
			rewrites = append(rewrites, time.Now())
			mu.Unlock()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(rewrites)
	}

	// The first renewal, of join's token, is due 12 s after join; from then
	// on every token the member returns claims to be ten days old.
	g.Eventually(count, 12*time.Second+hubtest.Within, hubtest.Poll).Should(BeNumerically(">=", 1))
	start, requestsBefore := time.Now(), front.tokenRequests.Load()
	time.Sleep(time.Until(start.Add(time.Minute)))
	n, requests := count()-1, front.tokenRequests.Load()-requestsBefore
	t.Logf("in the minute after the first forged token: %d registration rewrites, %d TokenRequests (due every %s)",
		n, requests, time.Duration(float64(10*time.Minute)*(1-renewRemaining)))
	// One renewal per 12 s: at most 5 in a minute, one more for the edges.
	g.Expect(n).To(BeNumerically("<=", 6), "registration rewrites in a minute")
	g.Expect(requests).To(BeNumerically("<=", 6), "TokenRequests in a minute")
	g.Expect(n).To(BeNumerically(">=", 3), "the hub still renews on its schedule")

	g.Eventually(func(g Gomega) {
		cond := credentialsExpiring(g, name)
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Reason).To(Equal(v1alpha1.MemberImplausibleTokenReason))
		g.Expect(cond.Message).To(ContainSubstring("before the hub asked for it"))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	mc := hubtest.ExpectMemberReady(t, name, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	front.mu.Lock()
	var tokens []string
	for forged, real := range front.real {
		tokens = append(tokens, forged, real)
	}
	front.mu.Unlock()
	for _, c := range mc.Status.Conditions {
		hubtest.ExpectNoneOf(t, "MemberCluster condition "+c.Type, c.Message, tokens)
	}
}
