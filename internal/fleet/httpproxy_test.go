package fleet

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// backend is an API server stand-in: /echo answers with the Authorization
// header it got, /stream writes a numbered line every 10 ms until the client
// goes (counting the lines it wrote), anything else answers "ok".
type backend struct {
	*httptest.Server
	streamed atomic.Int64
}

func newBackend(t *testing.T) *backend {
	b := &backend{}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			_, _ = io.WriteString(w, r.Header.Get("Authorization"))
		case "/stream":
			rc := http.NewResponseController(w)
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "%d\n", i); err != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
				b.streamed.Add(1)
				select {
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	b.EnableHTTP2 = true
	b.StartTLS()
	t.Cleanup(b.Close)
	return b
}

func (b *backend) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Certificate().Raw})
}

// newTestProxy starts a proxy in front of b and a client that trusts only the proxy.
func newTestProxy(t *testing.T, b *backend) (*HTTPProxy, *http.Client) {
	t.Helper()
	p, err := NewHTTPProxy(b.URL, b.caPEM())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CAData()) {
		t.Fatal("proxy CA data holds no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return p, &http.Client{Transport: tr}
}

func get(ctx context.Context, c *http.Client, url string, header ...string) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

func post(ctx context.Context, c *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

// openStream starts a proxy in front of a new backend and opens the
// backend's /stream through it; the stream is closed when the test ends.
func openStream(t *testing.T) (*backend, *HTTPProxy, *http.Client, *http.Response) {
	t.Helper()
	b := newBackend(t)
	p, c := newTestProxy(t, b)
	resp, err := c.Get(p.URL() + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return b, p, c, resp
}

// waitUntil polls cond every 5 ms, at most 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func TestHTTPProxyForwardsWithTheClientsToken(t *testing.T) {
	b := newBackend(t)
	p, c := newTestProxy(t, b)
	resp, body, err := get(t.Context(), c, p.URL()+"/echo", "Authorization", "Bearer abc")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || body != "Bearer abc" {
		t.Fatalf("got %d %q, want 200 with the client's Authorization header", resp.StatusCode, body)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("the proxy spoke %s, want HTTP/2 as an API server does", resp.Proto)
	}
}

func TestHTTPProxyRefusesNonLoopbackTargets(t *testing.T) {
	b := newBackend(t)
	for _, target := range []string{"https://10.0.0.1:6443", "example.com:443", "https://[::ffff:8.8.8.8]:443"} {
		if p, err := NewHTTPProxy(target, b.caPEM()); err == nil {
			p.Close()
			t.Errorf("NewHTTPProxy(%q) accepted a target off this machine", target)
		}
	}
}

func TestHTTPProxyAnswersWithStatus(t *testing.T) {
	b := newBackend(t)
	p, c := newTestProxy(t, b)
	p.Set(Fault{Status: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond})
	resp, body, err := get(t.Context(), c, p.URL()+"/")
	if err != nil {
		t.Fatal(err)
	}
	status := struct {
		Kind, Reason string
		Code         int
	}{}
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatalf("body %q is not a Status: %v", body, err)
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || status.Kind != "Status" || status.Code != 429 || status.Reason != "TooManyRequests" {
		t.Fatalf("got %d, Retry-After %q, %+v; want 429, Retry-After 2 (seconds, rounded up), a TooManyRequests Status", resp.StatusCode, resp.Header.Get("Retry-After"), status)
	}

	p.Set(Fault{Status: http.StatusInternalServerError, Match: Writes})
	if resp, _, err := get(t.Context(), c, p.URL()+"/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a GET, which the fault does not match: %v, %v", resp, err)
	}
	if resp, err := post(t.Context(), c, p.URL()+"/"); err != nil || resp.StatusCode != 500 || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("a POST: %v, %v; want 500 without Retry-After", resp, err)
	}
	if seen, faulted := p.Requests(); seen != 3 || faulted != 2 {
		t.Errorf("Requests() = %d seen, %d faulted; want 3, 2", seen, faulted)
	}
}

func TestHTTPProxyAddsLatency(t *testing.T) {
	b := newBackend(t)
	p, c := newTestProxy(t, b)
	const latency = 300 * time.Millisecond
	p.Set(Fault{Latency: latency})
	start := time.Now()
	if resp, _, err := get(t.Context(), c, p.URL()+"/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v, %v", resp, err)
	}
	if took := time.Since(start); took < latency {
		t.Fatalf("a request took %s with %s latency injected", took, latency)
	}
}

func TestHTTPProxyResetsConnections(t *testing.T) {
	_, p, c, resp := openStream(t)
	// An open stream is cut when every connection is reset.
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() {
		t.Fatal(lines.Err())
	}
	p.Set(Fault{Reset: true})
	for lines.Scan() { // bounded: the reset ends the stream
	}
	if lines.Err() == nil {
		t.Fatal("the stream ended cleanly; want an error from the reset")
	}
	// New connections are reset too.
	if _, _, err := get(t.Context(), c, p.URL()+"/"); err == nil {
		t.Fatal("a request went through while every connection is reset")
	}
	// With a Match, only the matched requests lose their connection.
	p.Set(Fault{Reset: true, Match: Writes})
	if resp, _, err := get(t.Context(), c, p.URL()+"/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v, %v", resp, err)
	}
	if _, err := post(t.Context(), c, p.URL()+"/"); err == nil {
		t.Fatal("a POST went through while writes are reset")
	}
}

func TestHTTPProxyBlackHolesMatchedRequests(t *testing.T) {
	b := newBackend(t)
	p, c := newTestProxy(t, b)
	p.Set(Fault{BlackHole: true, Match: Writes})
	done := make(chan error, 1)
	go func() {
		resp, err := post(context.Background(), c, p.URL()+"/things")
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		done <- err
	}()
	waitUntil(t, "the POST is held", func() bool { return len(p.Held()) == 1 })
	if got := p.Held(); got[0] != "POST /things" {
		t.Fatalf("Held() = %v", got)
	}
	// Other requests pass meanwhile.
	if resp, _, err := get(t.Context(), c, p.URL()+"/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v, %v", resp, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the held POST ended (%v) while the black hole holds it", err)
	default:
	}
	p.Clear()
	if err := <-done; err != nil {
		t.Fatalf("the POST released by Clear: %v", err)
	}
	if held := p.Held(); len(held) != 0 {
		t.Fatalf("Held() = %v after Clear", held)
	}

	// A client that gives up leaves nothing held.
	p.Set(Fault{BlackHole: true, Match: Writes})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _, err := post(ctx, c, p.URL()+"/abandoned"); done <- err }()
	waitUntil(t, "the POST is held", func() bool { return len(p.Held()) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned POST: %v", err)
	}
	waitUntil(t, "the abandoned POST is let go", func() bool { return len(p.Held()) == 0 })
}

func TestHTTPProxyBlackHolesOpenAndNewConnections(t *testing.T) {
	b, p, c, resp := openStream(t)
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(resp.Body)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	<-lines

	p.Set(Fault{BlackHole: true})
	// Drain what was under way when the black hole began, then nothing
	// arrives while the backend goes on writing 20 more lines.
	waitUntil(t, "the open stream stalls", func() bool { return p.stalled.Load() > 0 || len(p.Held()) > 0 })
	for drained := false; !drained; {
		select {
		case <-lines:
		case <-time.After(100 * time.Millisecond):
			drained = true
		}
	}
	wrote := b.streamed.Load()
	// A new connection is accepted and never answered.
	fresh := &http.Client{Transport: c.Transport.(*http.Transport).Clone()}
	newDone := make(chan error, 1)
	go func() {
		resp, _, err := get(context.Background(), fresh, p.URL()+"/")
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		newDone <- err
	}()
	waitUntil(t, "the backend writes on", func() bool { return b.streamed.Load() >= wrote+20 })
	select {
	case l := <-lines:
		t.Fatalf("line %q arrived through the black hole", l)
	case err := <-newDone:
		t.Fatalf("a new connection was answered (%v) through the black hole", err)
	default:
	}

	p.Clear()
	if _, ok := <-lines; !ok {
		t.Fatal("the stream ended instead of resuming")
	}
	if err := <-newDone; err != nil {
		t.Fatalf("the new connection's request after the black hole: %v", err)
	}
}

func TestHTTPProxyCloseReleasesEverything(t *testing.T) {
	b := newBackend(t)
	p, c := newTestProxy(t, b)
	p.Set(Fault{BlackHole: true, Match: Writes})
	done := make(chan error, 1)
	go func() { _, err := post(context.Background(), c, p.URL()+"/"); done <- err }()
	waitUntil(t, "the POST is held", func() bool { return len(p.Held()) == 1 })
	p.Close()
	if err := <-done; err == nil {
		t.Fatal("the held POST succeeded after Close")
	}
}
