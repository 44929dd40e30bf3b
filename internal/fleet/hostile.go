package fleet

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The answers of a hostile member, for Fault.Answer: an HTTPProxy in front
// of a real API server forwards what they do not match and answers the rest
// with one of these. Each is an http.Handler, so a new mode is one more
// function here.

// GzipBomb answers 200 with a gzip-encoded body that starts with prefix and
// decompresses to size bytes (prefix, then spaces), about a thousandth of
// that on the wire. The body is made once, when GzipBomb is called.
func GzipBomb(prefix string, size int64) http.Handler {
	const chunk = 1 << 20
	member := func(data []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(data)
		_ = zw.Close()
		return buf.Bytes()
	}
	// A gzip stream may be several members one after another: net/http
	// decompresses them as one body.
	body := member([]byte(prefix))
	filler := member(bytes.Repeat([]byte(" "), chunk))
	for n := int64(len(prefix)); n < size; n += chunk {
		body = append(body, filler...)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
}

// EndlessBody answers 200 with prefix followed by an endless run of x,
// until the client goes away.
func EndlessBody(prefix string) http.Handler {
	filler := bytes.Repeat([]byte("x"), 32<<10)
	return endless("application/json", []byte(prefix), func(int) []byte { return filler })
}

// EndlessList answers 200 with a list of apiVersion and kind (kind+"List")
// whose items never end: new objects named item-0, item-1, ... in namespace,
// until the client goes away. It allocates next to nothing itself, so that
// what a test measures is the client's.
func EndlessList(apiVersion, kind, namespace string) http.Handler {
	head := fmt.Sprintf(`{"apiVersion":%q,"kind":"%sList","metadata":{"resourceVersion":"1"},"items":[`, apiVersion, kind)
	before := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"namespace":%q,"name":"item-`, apiVersion, kind, namespace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 0, 64<<10)
		item := 0
		endless("application/json", []byte(head), func(int) []byte {
			buf = buf[:0]
			for len(buf) < 60<<10 {
				buf = append(buf, before...)
				buf = strconv.AppendInt(buf, int64(item), 10)
				buf = append(buf, `"}},`...)
				item++
			}
			return buf
		}).ServeHTTP(w, r)
	})
}

// PagedList answers each list request with one page of apiVersion's kind
// in namespace, about pageBytes of new objects (each with a 4 KiB
// annotation, so that a page decodes to few objects), and a continue token for the
// next page, until pages were answered (the last page has none); pages 0
// never ends: a paged list that every page keeps within the bound of one
// answer. The page is taken from the request's continue token, so that any
// client following the tokens gets every page once.
func PagedList(apiVersion, kind, namespace string, pageBytes, pages int) http.Handler {
	before := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"namespace":%q,"annotations":{"pad":"%s"},"name":"item-`,
		apiVersion, kind, namespace, strings.Repeat("x", 4<<10))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("continue"))
		next := ""
		if pages == 0 || page+1 < pages {
			next = strconv.Itoa(page + 1)
		}
		buf := make([]byte, 0, pageBytes+1024)
		buf = fmt.Appendf(buf, `{"apiVersion":%q,"kind":"%sList","metadata":{"resourceVersion":"1","continue":%q},"items":[`, apiVersion, kind, next)
		for i := 0; len(buf) < pageBytes; i++ {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = fmt.Appendf(buf, "%s%d-%d\"}}", before, page, i)
		}
		buf = append(buf, "]}"...)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(buf)
	})
}

// EmptyItems answers 200 with a list of apiVersion's kind (kind+"List")
// holding about size bytes of empty items, each of which decodes to a whole
// object: "{}" in JSON, or, with asProtobuf, two bytes each in an API
// server's protobuf envelope. The body is made once, when EmptyItems is
// called.
func EmptyItems(apiVersion, kind string, size int, asProtobuf bool) http.Handler {
	contentType := "application/json"
	var body []byte
	if asProtobuf {
		contentType = "application/vnd.kubernetes.protobuf"
		field := func(b []byte, n int, data []byte) []byte {
			b = append(b, byte(n<<3|2))
			b = binary.AppendUvarint(b, uint64(len(data)))
			return append(b, data...)
		}
		typeMeta := field(field(nil, 1, []byte(apiVersion)), 2, []byte(kind+"List"))
		raw := bytes.Repeat([]byte{2<<3 | 2, 0}, size/2) // field 2, items, each empty
		body = field(field([]byte("k8s\x00"), 1, typeMeta), 2, raw)
	} else {
		body = fmt.Appendf(nil, `{"apiVersion":%q,"kind":"%sList","metadata":{},"items":[{}`, apiVersion, kind)
		for len(body) < size {
			body = append(body, ",{}"...)
		}
		body = append(body, "]}"...)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	})
}

// EndlessWatch answers 200 with a watch stream of ADDED events that never
// ends: new objects of apiVersion and kind named item-0, item-1, ... in
// namespace, each with a UID and resourceVersion of its own, until the
// client goes away (the request's context ends). Like EndlessList it
// allocates next to nothing itself.
func EndlessWatch(apiVersion, kind, namespace string) http.Handler {
	before := fmt.Sprintf(`{"type":"ADDED","object":{"apiVersion":%q,"kind":%q,"metadata":{"namespace":%q,"name":"item-`, apiVersion, kind, namespace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 0, 64<<10)
		item := 0
		endless("application/json", nil, func(int) []byte {
			buf = buf[:0]
			for len(buf) < 60<<10 {
				n := strconv.Itoa(item)
				buf = append(buf, before...)
				buf = append(buf, n...)
				buf = append(buf, `","uid":"endless-`...)
				buf = append(buf, n...)
				buf = append(buf, `","resourceVersion":"`...)
				buf = strconv.AppendInt(buf, int64(item)+1000000, 10)
				buf = append(buf, "\"}}}\n"...)
				item++
			}
			return buf
		}).ServeHTTP(w, r)
	})
}

// endless writes head, then next(0), next(1), ... until a write fails.
func endless(contentType string, head []byte, next func(int) []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(head); err != nil {
			return
		}
		rc := http.NewResponseController(w)
		for i := 0; r.Context().Err() == nil; i++ {
			if _, err := w.Write(next(i)); err != nil {
				return
			}
			_ = rc.Flush()
		}
	})
}

// Redirect answers with code (301, 302, 303, 307, 308) and a Location at
// base with the request's path and query.
func Redirect(code int, base string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", strings.TrimSuffix(base, "/")+r.URL.RequestURI())
		w.WriteHeader(code)
	})
}

// Recorder is a server, on plain HTTP or HTTPS, that counts the connections
// it accepts (a TLS handshake that then fails included), the requests it
// receives and those that carry an Authorization header, and answers each
// with 200 and an empty JSON object: where a hostile member would send the
// hub.
type Recorder struct {
	srv                           *httptest.Server
	connections, requests, bearer atomic.Int64
	mu                            sync.Mutex
	authorizations                []string
}

// NewRecorder starts a Recorder on a loopback port: on HTTPS with cert when
// it is not nil (an HTTPProxy's Certificate, for a host the hub trusts as
// it trusts the member), else on plain HTTP.
func NewRecorder(cert *tls.Certificate) *Recorder {
	rec, err := NewRecorderAt("127.0.0.1:0", cert)
	if err != nil {
		panic(fmt.Sprintf("fleet: recorder on loopback: %v", err)) // as httptest.NewServer does
	}
	return rec
}

// NewRecorderAt starts a Recorder listening at address (host:port, port 0
// for any), e.g. an address the hub must never connect to.
func NewRecorderAt(address string, cert *tls.Certificate) (*Recorder, error) {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	rec := &Recorder{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.requests.Add(1)
		if a := r.Header.Get("Authorization"); a != "" {
			rec.bearer.Add(1)
			rec.mu.Lock()
			rec.authorizations = append(rec.authorizations, a)
			rec.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	})
	rec.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rec.connections.Add(1)
		}
	}}}
	if cert != nil {
		rec.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		rec.srv.StartTLS()
	} else {
		rec.srv.Start()
	}
	return rec, nil
}

// Connections is how many connections the Recorder accepted.
func (r *Recorder) Connections() int64 { return r.connections.Load() }

// URL is the Recorder's address.
func (r *Recorder) URL() string { return r.srv.URL }

// Requests is how many requests the Recorder received, and how many of them
// carried an Authorization header.
func (r *Recorder) Requests() (all, withAuthorization int64) {
	return r.requests.Load(), r.bearer.Load()
}

// Authorizations are the Authorization headers received, in order.
func (r *Recorder) Authorizations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.authorizations...)
}

// Close stops the Recorder.
func (r *Recorder) Close() { r.srv.Close() }
