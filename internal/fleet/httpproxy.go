package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Fault is what an HTTPProxy does to the requests it matches instead of
// forwarding them as they come. The zero Fault forwards every request.
//
// The faults apply in this order: BlackHole, Reset, Latency, then Status,
// Answer or forwarding. With Match nil, BlackHole and Reset apply to connections, not
// only requests: every connection, open or new, stops carrying bytes in
// either direction (a black hole: accepted, never answered, watch streams
// stall, HTTP/2 pings go unanswered) or is reset.
type Fault struct {
	// Match selects the requests the fault applies to; nil selects every
	// request and every connection. See NotWatch and Writes.
	Match func(*http.Request) bool
	// BlackHole holds the matched requests without an answer, and stalls the
	// responses of matched requests under way (watch streams), until the
	// fault changes or the client gives up.
	BlackHole bool
	// Reset closes the connection of a matched request with a TCP reset.
	Reset bool
	// Latency delays each matched request before it is answered or forwarded.
	Latency time.Duration
	// Status, when set, answers each matched request with this HTTP status
	// and a Kubernetes Status body instead of forwarding it (429 or 500).
	Status int
	// RetryAfter is sent as the Retry-After header (whole seconds) with Status.
	RetryAfter time.Duration
	// Answer, when set, answers each matched request in the member's place
	// (a hostile member: see hostile.go) instead of forwarding it.
	Answer http.Handler
}

// allConnections reports whether the fault applies to connections as a whole.
func (f Fault) allConnections() bool { return f.Match == nil }

func (f Fault) matches(r *http.Request) bool {
	if !f.BlackHole && !f.Reset && f.Latency == 0 && f.Status == 0 && f.Answer == nil {
		return false // no fault
	}
	return f.Match == nil || f.Match(r)
}

// NotWatch matches every request but watches: the requests a member's API
// server answers once, as opposed to the streams it keeps open.
func NotWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w != "true" && w != "1"
}

// Writes matches requests that change something (every method but GET and HEAD).
func Writes(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

// HTTPProxy is a TLS-terminating reverse proxy on a loopback address in
// front of one API server, whose faults tests switch at run time (Set,
// Clear). It presents a self-signed certificate of its own (CAData) and
// forwards to the API server over TLS without a client certificate, so a
// client authenticates with a bearer token, which passes through; a client
// certificate cannot pass a terminating proxy.
type HTTPProxy struct {
	url    string
	caPEM  []byte
	target *url.URL
	proxy  *httputil.ReverseProxy
	srv    *http.Server
	ln     net.Listener
	closed chan struct{}
	// upstream is the transport to the API server, closed with the proxy.
	upstream *http.Transport

	mu    sync.Mutex
	fault Fault
	// changed is closed, and replaced, whenever the fault changes.
	changed chan struct{}
	conns   map[*proxyConn]struct{}
	// held counts the requests held in a black hole, by "METHOD path".
	held map[string]int

	seen, faulted atomic.Int64
	// stalled counts connection reads and writes waiting in a black hole.
	stalled atomic.Int64
}

// NewHTTPProxy starts a proxy on a free loopback port in front of the API
// server at host (https://127.0.0.1:port or host:port, a loopback address)
// whose serving certificate caPEM signs. Close releases it.
func NewHTTPProxy(host string, caPEM []byte) (*HTTPProxy, error) {
	target, err := loopbackTarget(host)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("http proxy: no certificate in the target's CA data")
	}
	cert, caPEM2, err := selfSignedLoopbackCert()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("http proxy: listen: %w", err)
	}
	p := &HTTPProxy{
		url:     "https://" + ln.Addr().String(),
		caPEM:   caPEM2,
		target:  target,
		closed:  make(chan struct{}),
		changed: make(chan struct{}),
		conns:   map[*proxyConn]struct{}{},
		held:    map[string]int{},
	}
	p.ln = &proxyListener{Listener: ln, p: p}
	p.upstream = &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 16,
	}
	quiet := log.New(io.Discard, "", 0)
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
		},
		Transport:     p.upstream,
		FlushInterval: -1,
		ErrorLog:      quiet,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			WriteStatus(w, http.StatusBadGateway, 0, "proxy: "+err.Error())
		},
	}
	p.srv = &http.Server{
		Handler:           p,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          quiet,
		ReadHeaderTimeout: time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go func() { _ = p.srv.ServeTLS(p.ln, "", "") }()
	return p, nil
}

// loopbackTarget parses host and refuses anything but a loopback address.
func loopbackTarget(host string) (*url.URL, error) {
	raw := host
	if u, err := url.Parse(host); err == nil && u.Scheme != "" {
		raw = u.Host
	}
	h, port, err := net.SplitHostPort(raw)
	if err != nil {
		return nil, fmt.Errorf("http proxy: target %q: %w", host, err)
	}
	if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("http proxy: target %q is not a loopback address", host)
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(h, port)}, nil
}

// selfSignedLoopbackCert is a certificate for 127.0.0.1 that is its own CA.
func selfSignedLoopbackCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "widgethub fleet proxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// URL is the proxy's https:// address.
func (p *HTTPProxy) URL() string { return p.url }

// Certificate is the certificate and key the proxy presents: another server
// that presents it (NewRecorder) is trusted wherever the proxy is.
func (p *HTTPProxy) Certificate() *tls.Certificate {
	cert := p.srv.TLSConfig.Certificates[0]
	return &cert
}

// CAData is the PEM certificate the proxy presents, to trust as a CA.
func (p *HTTPProxy) CAData() []byte { return slices.Clone(p.caPEM) }

// Kubeconfig returns kubeconfig pointed at the proxy: its current context's
// cluster names the proxy and trusts its certificate, and its user
// authenticates with token (no client certificate).
func (p *HTTPProxy) Kubeconfig(kubeconfig []byte, token string) ([]byte, error) {
	return EditKubeconfig(kubeconfig, func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		c.Server, c.CertificateAuthorityData = p.url, p.CAData()
		u.ClientCertificateData, u.ClientKeyData, u.Token = nil, nil, token
	})
}

// Set replaces the fault. Requests and connections held by a black hole that
// the new fault does not hold go on; with Reset and no Match, every open
// connection is reset at once.
func (p *HTTPProxy) Set(f Fault) {
	p.mu.Lock()
	p.fault = f
	close(p.changed)
	p.changed = make(chan struct{})
	var reset []*proxyConn
	if f.Reset && f.allConnections() {
		for c := range p.conns {
			reset = append(reset, c)
		}
	}
	p.mu.Unlock()
	for _, c := range reset {
		c.reset()
	}
}

// Clear removes the fault: the proxy forwards everything again.
func (p *HTTPProxy) Clear() { p.Set(Fault{}) }

// Held lists the requests a black hole holds now, as "METHOD path", sorted.
func (p *HTTPProxy) Held() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k, n := range p.held {
		for range n {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Requests reports how many requests the proxy has received and how many of
// them a fault met.
func (p *HTTPProxy) Requests() (seen, faulted int64) { return p.seen.Load(), p.faulted.Load() }

// Close stops the proxy: it closes the listener and every connection and
// releases whatever a black hole holds.
func (p *HTTPProxy) Close() {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return
	default:
	}
	close(p.closed)
	p.mu.Unlock()
	// Held handlers abort, and the server closes every connection it serves.
	_ = p.srv.Close()
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	p.upstream.CloseIdleConnections()
}

// current returns the fault and a channel closed when it changes.
func (p *HTTPProxy) current() (Fault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault, p.changed
}

// ServeHTTP applies the fault to r, then answers or forwards it.
func (p *HTTPProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.seen.Add(1)
	f, _ := p.current()
	if !f.matches(r) {
		p.proxy.ServeHTTP(&stallingWriter{ResponseWriter: w, p: p, r: r}, r)
		return
	}
	p.faulted.Add(1)
	if f.BlackHole {
		if !p.holdWhile(r, func(f Fault) bool { return f.BlackHole && f.matches(r) }) {
			panic(http.ErrAbortHandler) // never answered
		}
		f, _ = p.current() // the fault that let it go
		if !f.matches(r) {
			p.proxy.ServeHTTP(&stallingWriter{ResponseWriter: w, p: p, r: r}, r)
			return
		}
	}
	if f.Reset {
		if c, ok := r.Context().Value(connKey{}).(*tls.Conn); ok {
			if pc, ok := c.NetConn().(*proxyConn); ok {
				pc.reset()
				return
			}
		}
		panic(http.ErrAbortHandler) // closes the connection, without a reset
	}
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			panic(http.ErrAbortHandler)
		case <-p.closed:
			t.Stop()
			panic(http.ErrAbortHandler)
		}
	}
	if f.Status != 0 {
		WriteStatus(w, f.Status, f.RetryAfter, "injected by the fleet proxy")
		return
	}
	if f.Answer != nil {
		f.Answer.ServeHTTP(w, r)
		return
	}
	p.proxy.ServeHTTP(&stallingWriter{ResponseWriter: w, p: p, r: r}, r)
}

// holdWhile holds r while hold says so of the current fault; it reports
// false when r's client gave up or the proxy closed meanwhile.
func (p *HTTPProxy) holdWhile(r *http.Request, hold func(Fault) bool) bool {
	if f, _ := p.current(); !hold(f) {
		return true
	}
	key := r.Method + " " + r.URL.Path
	p.mu.Lock()
	p.held[key]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.held[key]--; p.held[key] == 0 {
			delete(p.held, key)
		}
		p.mu.Unlock()
	}()
	for {
		f, changed := p.current()
		if !hold(f) {
			return true
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return false
		case <-p.closed:
			return false
		}
	}
}

// WriteStatus answers with a Kubernetes Status of code, and a Retry-After
// header when retryAfter is above zero.
func WriteStatus(w http.ResponseWriter, code int, retryAfter time.Duration, message string) {
	reason := map[int]string{http.StatusTooManyRequests: "TooManyRequests", http.StatusInternalServerError: "InternalError",
		http.StatusBadGateway: "InternalError", http.StatusServiceUnavailable: "ServiceUnavailable"}[code]
	status := map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": message, "reason": reason, "code": code}
	if retryAfter > 0 {
		secs := int((retryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		status["details"] = map[string]any{"retryAfterSeconds": secs}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}

type connKey struct{}

// stallingWriter stalls the response of r while a black hole matches it, so
// that a stream under way (a watch) stops when the black hole starts.
type stallingWriter struct {
	http.ResponseWriter
	p *HTTPProxy
	r *http.Request
}

func (s *stallingWriter) Write(b []byte) (int, error) {
	if !s.p.holdWhile(s.r, func(f Fault) bool { return f.BlackHole && f.matches(s.r) }) {
		return 0, http.ErrAbortHandler
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (and so ReverseProxy's flushes) reach the connection.
func (s *stallingWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// proxyListener tracks the proxy's connections and applies connection faults.
type proxyListener struct {
	net.Listener
	p *HTTPProxy
}

func (l *proxyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pc := &proxyConn{Conn: c, p: l.p, done: make(chan struct{})}
	l.p.mu.Lock()
	l.p.conns[pc] = struct{}{}
	f := l.p.fault
	l.p.mu.Unlock()
	if f.Reset && f.allConnections() {
		pc.reset()
	}
	return pc, nil
}

// proxyConn is one client connection. While a black hole holds every
// connection, its reads and writes wait; a reset closes it with RST.
type proxyConn struct {
	net.Conn
	p         *HTTPProxy
	done      chan struct{}
	closeOnce sync.Once
}

func (c *proxyConn) Read(b []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *proxyConn) Write(b []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// wait returns once no black hole holds every connection, or the connection closes.
func (c *proxyConn) wait() error {
	for counted := false; ; {
		f, changed := c.p.current()
		if !f.BlackHole || !f.allConnections() {
			if counted {
				c.p.stalled.Add(-1)
			}
			return nil
		}
		if !counted {
			c.p.stalled.Add(1)
			counted = true
		}
		select {
		case <-changed:
		case <-c.done:
			c.p.stalled.Add(-1)
			return net.ErrClosed
		}
	}
}

// reset closes the connection with a TCP reset.
func (c *proxyConn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (c *proxyConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.done)
		err = c.Conn.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
	return err
}
