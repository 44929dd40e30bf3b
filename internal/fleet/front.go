package fleet

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Front is a hostile member: a TLS server on a loopback address that answers
// the requests its Answer function takes itself, with whatever a test
// chooses, and forwards every other request to a real member's API server as
// that member's admin (the Authorization a client sends stays with the
// front). Close releases it.
type Front struct {
	*httptest.Server
}

// Answer answers r and returns true, or returns false to let the front
// forward r to the member.
type Answer func(w http.ResponseWriter, r *http.Request) bool

// NewFront starts a front before cp that answers with answer.
func NewFront(cp *ControlPlane, answer Answer) (*Front, error) {
	target, err := url.Parse(cp.Config.Host)
	if err != nil {
		return nil, err
	}
	upstream, err := rest.TransportFor(cp.Config)
	if err != nil {
		return nil, err
	}
	forward := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Del("Authorization")
		},
		Transport:     upstream,
		FlushInterval: -1,
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !answer(w, r) {
			forward.ServeHTTP(w, r)
		}
	}))
	return &Front{Server: srv}, nil
}

// CAData is the PEM certificate the front presents, to trust as a CA.
func (f *Front) CAData() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
}

// Kubeconfig returns kubeconfig pointed at the front, authenticating with
// token (which the front does not pass on).
func (f *Front) Kubeconfig(kubeconfig []byte, token string) ([]byte, error) {
	return EditKubeconfig(kubeconfig, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.Server, c.CertificateAuthorityData = f.URL, f.CAData()
		*u = clientcmdapi.AuthInfo{Token: token}
	})
}
