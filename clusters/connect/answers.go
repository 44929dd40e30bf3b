package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// ErrResponseTooLarge is wrapped when a member's answer is larger than the
// hub accepts (MaxResponseBytes for an answer, MaxEventBytes for one watch
// event, counted after decompression): the request fails, its connection is
// closed, and nothing more of the answer is read.
var ErrResponseTooLarge = errors.New("member answer too large")

// ErrRedirectRefused is wrapped when a member answers with a redirect (a 3xx
// status but 304): the hub never follows one, since the next hop would get
// the member's credentials and, for a 307 or 308, a replay of the request.
var ErrRedirectRefused = errors.New("member answered with a redirect")

// Bounds of a member's answers, counted after decompression.
const (
	// DefaultMaxResponseBytes bounds one answer but a watch: a whole list
	// served from the API server's watch cache (resourceVersion=0 ignores
	// limit; the reflector only falls back to such a list when the member
	// refuses a streaming watch-list), the pages of a paged list together
	// (client-go's pager holds them all until the last), and any single
	// object. kube-apiserver stores objects of at most ~1.5 MiB
	// (etcd's request limit) and accepts request bodies of at most 3 MiB:
	// 64 MiB holds the largest object twenty times over, or about 30,000
	// Widgets of 2 KiB in one list.
	DefaultMaxResponseBytes = 64 << 20
	// MaxEventBytes bounds one event of a watch stream (a JSON value or a
	// protobuf frame), not the stream, which lives as long as the watch: an
	// event holds one object, so more than twice the largest object an API
	// server accepts.
	MaxEventBytes = 8 << 20
	// MaxResponseHeaderBytes bounds the headers of one answer, over HTTP/1.1
	// and HTTP/2 alike (net/http's own bound is 10 MiB): an API server's
	// are a few KiB, its warnings included.
	MaxResponseHeaderBytes = 1 << 20
	// MaxWarnings bounds the warnings of one answer that reach the hub's
	// handler (WarningLogger logs each): a member's 1 MiB of headers may
	// hold about 100,000 short ones. An API server sends a few.
	MaxWarnings = 10
)

// boundHeaders narrows rt's bound of answer headers to
// MaxResponseHeaderBytes when rt is net/http's Transport. Call it only on a
// transport not yet used: finish's wrapper runs when client-go has just
// built one for a client (a member's config, which has a Proxy function, is
// never given a shared transport). HTTP/2 connections read the bound when
// they are made.
func boundHeaders(rt http.RoundTripper) {
	if t, ok := rt.(*http.Transport); ok {
		t.MaxResponseHeaderBytes = MaxResponseHeaderBytes
	}
}

// answerGuard sits directly above net/http's Transport in every client built
// from a member's config (finish installs it with rest.Config.Wrap, below
// client-go's authentication), so the bodies it sees are already
// decompressed. It refuses redirects, bounds answers, and refuses a request
// that would go through a proxy to a refused destination.
//
// net/http's transparent gzip stays on: kube-apiserver compresses answers
// over 128 KiB (lists, discovery), which a member across a WAN sends about
// ten times smaller, and since the bounds count decompressed bytes a
// compression bomb costs at most the bound's worth of decompression per
// request, not memory.
type answerGuard struct {
	// maxBytes bounds an answer but a watch's; zero bounds none.
	maxBytes int64
	// proxy is the config's proxy function; allowLinkLocal its destinations'.
	proxy          func(*http.Request) (*url.URL, error)
	allowLinkLocal bool
	next           http.RoundTripper
	// pages counts what the pages of each paged list read so far.
	pages pagedLists
}

func (g *answerGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.checkProxied(req); err != nil {
		return nil, err
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if isRedirect(resp.StatusCode) {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: %d %s to %s %s (widgethub never follows a member's redirect)",
			ErrRedirectRefused, resp.StatusCode, http.StatusText(resp.StatusCode), req.Method, req.URL.Path)
	}
	boundWarnings(resp.Header)
	switch {
	case g.maxBytes <= 0:
	case IsWatch(req) && resp.StatusCode == http.StatusOK:
		resp.Body = newEventBound(resp.Body, resp.Header.Get("Content-Type"), MaxEventBytes)
	default:
		body := &boundedBody{rc: resp.Body, left: g.maxBytes, limit: g.maxBytes, what: "the answer"}
		if l, ok := req.Context().Value(limitKey{}).(int64); ok && l < body.left {
			body.left, body.limit = l, l
		}
		q := req.URL.Query()
		if resp.StatusCode == http.StatusOK {
			if err := body.countItems(q, resp.Header.Get("Content-Type")); err != nil {
				_ = resp.Body.Close()
				return nil, err
			}
		}
		if list, continues := pageOf(req.Method, req.URL.Path, q); list != "" {
			so := g.pages.start(list, continues)
			if left := g.maxBytes - so.read; left < body.left {
				body.left, body.limit, body.what = max(left, 0), g.maxBytes, "a paged list, its pages together,"
			}
			body.itemsBefore = so.items
			body.done = func(read, items int64) { g.pages.add(list, read, items) }
		}
		resp.Body = body
	}
	return resp, nil
}

// MaxListItems bounds the items of one list answer, and of a paged list's
// pages together: twice the default bound of a member's objects, so that a
// member past that bound is still reported TooManyObjects up to here. An
// answer to a request with a limit holds at most that many, wherever the API
// honours limit (all but resourceVersion=0, which the watch cache may serve
// whole).
const MaxListItems = 100_000

// countItems makes b count the items of its answer to a request of query q,
// of media type contentType, as they arrive: past the request's limit, or
// MaxListItems, the answer fails with ErrResponseTooLarge. A media type whose
// items cannot be counted (YAML, which client-go would decode too) is
// refused.
func (b *boundedBody) countItems(q url.Values, contentType string) error {
	mediaType := mediaTypeOf(contentType)
	switch {
	case mediaType == protobufMediaType:
		b.items = &protoItems{}
	case strings.Contains(mediaType, "yaml"):
		return fmt.Errorf("%w: an answer in %s, whose items the hub does not count", ErrResponseTooLarge, mediaType)
	default:
		b.items = &jsonItems{}
	}
	b.maxItems = MaxListItems
	if limit, err := strconv.ParseInt(q.Get("limit"), 10, 64); err == nil && limit > 0 && q.Get("resourceVersion") != "0" {
		b.maxItems = min(limit, MaxListItems)
	}
	return nil
}

// boundWarnings keeps the first MaxWarnings warnings of an answer's headers
// and, in place of the rest, one that says how many were left out.
func boundWarnings(h http.Header) {
	lines := h.Values("Warning")
	if len(lines) == 0 {
		return
	}
	warnings, _ := utilnet.ParseWarningHeaders(lines)
	if len(warnings) <= MaxWarnings {
		return
	}
	kept := make([]string, 0, MaxWarnings+1)
	for _, w := range warnings[:MaxWarnings] {
		if v, err := utilnet.NewWarningHeader(w.Code, w.Agent, w.Text); err == nil {
			kept = append(kept, v)
		}
	}
	if v, err := utilnet.NewWarningHeader(299, "-", fmt.Sprintf("%d more warnings of this answer left out", len(warnings)-MaxWarnings)); err == nil {
		kept = append(kept, v)
	}
	h["Warning"] = kept
}

// WrappedRoundTripper lets client-go's utilities reach the transport below.
func (g *answerGuard) WrappedRoundTripper() http.RoundTripper { return g.next }

// isRedirect tells the statuses net/http would follow, and any other 3xx
// but 304 Not Modified (not a redirect): an API server answers none.
func isRedirect(code int) bool {
	return code >= 300 && code < 400 && code != http.StatusNotModified
}

// refuseRedirect is an http.Client's CheckRedirect: should a redirect get
// past the transport, it is still not followed.
func refuseRedirect(req *http.Request, via []*http.Request) error {
	code := 0
	if req.Response != nil {
		code = req.Response.StatusCode
	}
	return fmt.Errorf("%w: %d %s", ErrRedirectRefused, code, http.StatusText(code))
}

// HTTPClientFor is rest.HTTPClientFor for a client that follows no
// redirect: should one get past the config's transport (answerGuard, or
// GuardUserContext for a config RESTConfig did not make), the client itself
// refuses it with ErrRedirectRefused. Every client of a member, and the
// plugin's, is built with it.
func HTTPClientFor(cfg *rest.Config) (*http.Client, error) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c.CheckRedirect = refuseRedirect
	return c, nil
}

// GuardUserContext wraps rt, for rest.Config.Wrap of a context of the user's
// own kubeconfig (the plugin's), so that an answer with a redirect fails
// with ErrRedirectRefused and answers are bounded as a member's (bodies and
// paged lists at DefaultMaxResponseBytes, watch events, WithResponseLimit);
// every address stays allowed, and the headers keep net/http's bound, since
// client-go may share the transport below between such configs.
func GuardUserContext(rt http.RoundTripper) http.RoundTripper {
	return &answerGuard{next: rt, allowLinkLocal: true, maxBytes: DefaultMaxResponseBytes}
}

// pagedLists counts the bytes read by the pages of each paged list, by
// pageOf's key: client-go's pager (the reflector's list when a member refuses
// a streaming watch-list) holds every page until the one without a continue
// token, so a member answering each page within the bound with a token for
// another would otherwise grow the hub without end. Keys come from the
// hub's own requests (path, selectors, page size), so the map stays small.
// Two lists of one key under way at once would share a count: a member's
// caches run one informer of a kind, and nothing else pages.
type pagedLists struct {
	mu    sync.Mutex
	lists map[string]pagesSoFar
}

// pagesSoFar is what a paged list's pages read so far: bytes, and items.
type pagesSoFar struct{ read, items int64 }

// start returns what list's pages read so far, and begins it afresh unless
// the request continues it.
func (p *pagedLists) start(list string, continues bool) pagesSoFar {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lists == nil {
		p.lists = map[string]pagesSoFar{}
	}
	if !continues {
		p.lists[list] = pagesSoFar{}
	}
	return p.lists[list]
}

func (p *pagedLists) add(list string, read, items int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	so := p.lists[list]
	so.read += read
	so.items += items
	p.lists[list] = so
}

// pageOf is the key of the paged list a request (method, path, query q)
// asks a page of ("" if it asks none: a GET without limit), and whether it
// continues one. A list's pages share their path, selectors and page size; a
// list of another page size (the probe's of one object) is another list.
func pageOf(method, path string, q url.Values) (list string, continues bool) {
	if method != http.MethodGet || q.Get("limit") == "" {
		return "", false
	}
	key := url.Values{"limit": q["limit"], "labelSelector": q["labelSelector"], "fieldSelector": q["fieldSelector"]}
	return path + "?" + key.Encode(), q.Get("continue") != ""
}

type limitKey struct{}

// WithResponseLimit narrows the bound of the answers to the requests made
// with the returned context to limit bytes.
func WithResponseLimit(ctx context.Context, limit int64) context.Context {
	return context.WithValue(ctx, limitKey{}, limit)
}

func tooLarge(limit int64, what string) error {
	return fmt.Errorf("%w: %s is larger than %d bytes (after decompression); not read further", ErrResponseTooLarge, what, limit)
}

// boundedBody fails with ErrResponseTooLarge, and closes the body it wraps,
// once more than left bytes are read; the error says what passed limit.
// done, if set, is told on Close how many bytes were read.
type boundedBody struct {
	mu    sync.Mutex
	rc    io.ReadCloser
	left  int64
	limit int64
	what  string
	err   error
	read  int64
	done  func(read, items int64)
	// items, if set, counts the answer's items: at most maxItems, and with
	// itemsBefore (a paged list's earlier pages) at most MaxListItems.
	items                 interface{ count(p []byte) (int64, error) }
	maxItems, itemsBefore int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the bound tells it is passed
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		b.err = tooLarge(b.limit, b.what)
		_ = b.rc.Close() // no draining: the connection goes
		n = int(b.left)
		b.read += int64(n)
		return n, b.err
	}
	b.left -= int64(n)
	b.read += int64(n)
	if b.items != nil {
		items, cerr := b.items.count(p[:n])
		switch {
		case cerr != nil:
			b.err = fmt.Errorf("%w: %w", ErrResponseTooLarge, cerr)
		case items > b.maxItems:
			b.err = fmt.Errorf("%w: a list answer holds more than %d items (asked for at most that many, or past connect.MaxListItems); not read further", ErrResponseTooLarge, b.maxItems)
		case b.itemsBefore+items > MaxListItems: // for one answer, maxItems is the tighter
			b.err = fmt.Errorf("%w: a paged list's pages together hold more than %d items; not read further", ErrResponseTooLarge, MaxListItems)
		}
		if b.err != nil {
			_ = b.rc.Close()
			return 0, b.err
		}
	}
	return n, err
}

// Close closes the body first, so that a Read blocked on it returns, and
// then tells done what was read.
func (b *boundedBody) Close() error {
	err := b.rc.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		var items int64
		if b.items != nil {
			items, _ = b.items.count(nil)
		}
		b.done(b.read, items)
		b.done = nil
	}
	return err
}

// eventBound bounds each event of a watch stream: a protobuf stream by the
// length of its frames, any other (JSON) by the bytes since the last
// complete top-level JSON value, so that an endless or oversized event fails
// with ErrResponseTooLarge before the decoder above buffers it. A CBOR
// stream (client-go's ClientsAllowCBOR, off by default in v0.36) would be
// counted as one value, and so fail after MaxEventBytes in all.
type eventBound struct {
	mu    sync.Mutex
	rc    io.ReadCloser
	limit int64
	err   error
	// scan consumes p and returns how many of its bytes stay within the bound.
	scan func(p []byte) (int, bool)
}

func newEventBound(rc io.ReadCloser, contentType string, limit int64) *eventBound {
	e := &eventBound{rc: rc, limit: limit}
	if mediaTypeOf(contentType) == protobufMediaType {
		e.scan = (&frameScan{limit: limit}).scan
	} else {
		e.scan = (&jsonScan{limit: limit}).scan
	}
	return e
}

func (e *eventBound) Read(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.rc.Read(p)
	if ok, passed := e.scan(p[:n]); !passed {
		e.err = tooLarge(e.limit, "a watch event")
		_ = e.rc.Close()
		return ok, e.err
	}
	return n, err
}

func (e *eventBound) Close() error { return e.rc.Close() }

const protobufMediaType = "application/vnd.kubernetes.protobuf"

// mediaTypeOf is an answer's media type as client-go reads it to pick a
// decoder: mime's, which ignores case and parameters; "" (JSON) if none
// parses.
func mediaTypeOf(contentType string) string {
	mediaType, _, _ := mime.ParseMediaType(contentType)
	return mediaType
}

// jsonScan counts the bytes of the JSON value under way, and of the
// whitespace before it: a stream of JSON values, as a watch sends them.
type jsonScan struct {
	limit, n         int64
	depth            int
	inString, escape bool
}

func (s *jsonScan) scan(p []byte) (int, bool) {
	for i, c := range p {
		s.n++
		if s.n > s.limit {
			return i, false
		}
		switch {
		case s.inString:
			switch {
			case s.escape:
				s.escape = false
			case c == '\\':
				s.escape = true
			case c == '"':
				s.inString = false
			}
		case c == '"':
			s.inString = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			if s.depth--; s.depth <= 0 {
				s.depth, s.n = 0, 0 // one value complete
			}
		}
	}
	return len(p), true
}

// frameScan follows the 4-byte big-endian length prefixes of a protobuf
// watch stream and refuses a frame longer than limit.
type frameScan struct {
	limit int64
	// header holds the bytes of a length prefix read so far; left is what
	// remains of the frame under way.
	header []byte
	left   int64
}

func (s *frameScan) scan(p []byte) (int, bool) {
	for i := 0; i < len(p); {
		if s.left > 0 {
			step := min(s.left, int64(len(p)-i))
			s.left -= step
			i += int(step)
			continue
		}
		s.header = append(s.header, p[i])
		i++
		if len(s.header) == 4 {
			size := int64(s.header[0])<<24 | int64(s.header[1])<<16 | int64(s.header[2])<<8 | int64(s.header[3])
			s.header = s.header[:0]
			if size > s.limit {
				return i, false
			}
			s.left = size
		}
	}
	return len(p), true
}

// checkProxied refuses a request that would go through a proxy to a member
// whose name resolves to a refused address. The dialer sees only the proxy's
// address then; this check sees what the name resolves to here, which the
// proxy resolves again on its own (see docs/registration.md).
func (g *answerGuard) checkProxied(req *http.Request) error {
	if g.allowLinkLocal || g.proxy == nil {
		return nil
	}
	proxy, err := g.proxy(req)
	if err != nil || proxy == nil {
		return nil // net/http reports a broken proxy setting itself
	}
	return refuseHost(req.Context(), req.URL.Hostname())
}

// IsWatch tells a watch request (?watch=true or 1), whose answer is a stream.
func IsWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}
