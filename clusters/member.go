package clusters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// ErrKindMissing is wrapped when a member does not serve a kind the operator watches
// (typically: the Widget CRD is not installed there).
var ErrKindMissing = errors.New("kind not served by the member")

// ErrSyncTimeout is wrapped when a member's informers did not sync in time.
var ErrSyncTimeout = errors.New("cache did not sync")

// Member is one member cluster: a controller-runtime cluster with its own
// HTTP client and a lifetime of its own.
type Member struct {
	cluster.Cluster

	name       string
	httpClient *http.Client
	conns      *connections
	log        logr.Logger
	// events is the budget of the Events sent to the member.
	events *rate.Limiter
	// token, once set by SetToken, replaces the config's bearer token.
	token atomic.Pointer[string]
	// bearer tells whether the config authenticates with a bearer token.
	bearer bool
	// objects bounds the objects of its caches (objects.go).
	objects objectBound

	// gate, when set, is asked before every request (see MemberOptions.Gate).
	gate func() error
	// requests counts the requests in flight, so that Drain can wait for them.
	requests inFlight
	// refused is the latest answer refused as too large or a redirect, until
	// Preflight reports it.
	refused atomic.Pointer[error]

	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	watchErr error
}

// MemberOptions are what a Member needs besides its Config.
type MemberOptions struct {
	// Scheme of the member's objects. Required.
	Scheme *runtime.Scheme
	// Logger names the member in every line.
	Logger logr.Logger
	// CacheByObject narrows what the member's cache holds per kind, e.g. only
	// the Deployments the operator manages. Its kinds must be namespaced.
	CacheByObject map[client.Object]cache.ByObject
	// Gate, when set, is asked before every request to the member: a request
	// it refuses fails with its error and is not sent. A sharded hub refuses
	// once its replica may no longer serve the member.
	Gate func() error
	// Transform, when set, trims every object before the cache holds it
	// (cache.Options.DefaultTransform).
	Transform toolscache.TransformFunc
	// MaxObjects, when positive, bounds the objects the member's caches
	// hold: past it they stop and TooManyObjects says so (objects.go).
	MaxObjects int
}

// New builds a Member named name from cfg; it does not contact the member.
func New(name string, cfg *connect.Config, opts MemberOptions) (*Member, error) {
	log := opts.Logger
	dial := cfg.REST.Dial
	if dial == nil {
		dial = connect.Dialer(false).DialContext
	}
	m := &Member{name: name, log: log, events: newEventBudget(), conns: &connections{
		dial: dial,
		open: map[net.Conn]struct{}{},
	}, bearer: cfg.REST.BearerToken != "", gate: opts.Gate}
	m.objects = objectBound{max: opts.MaxObjects, stop: m.stopCache}
	restCfg := rest.CopyConfig(cfg.REST)
	restCfg.Dial = m.conns.dialTracked
	// Warnings logged as the member's, under its name.
	restCfg.WarningHandler, restCfg.WarningHandlerWithContext = nil, connect.WarningLogger(log)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &stoppable{member: m, next: &deadline{timeout: cfg.RequestTimeout, next: rt}}
	})
	httpClient, err := connect.HTTPClientFor(restCfg)
	if err != nil {
		return nil, fmt.Errorf("member %q: http client: %w", name, err)
	}
	m.httpClient = httpClient
	cl, err := cluster.New(restCfg, func(o *cluster.Options) {
		o.Scheme = opts.Scheme
		o.HTTPClient = httpClient
		o.Cache.ByObject = m.objects.byObject(opts.CacheByObject)
		o.Cache.DefaultTransform = m.objects.transform(opts.Transform)
		// The cache asks the mapper about the kinds of ByObject when it is
		// built; answer from what is known so that New sends no request.
		o.MapperProvider = func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
			return namespacedFirst(c, hc, opts.Scheme, opts.CacheByObject)
		}
		o.Logger = log
		o.Cache.ReaderFailOnMissingInformer = true
		o.Cache.DefaultWatchErrorHandler = m.recordWatchError
	})
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", name, err)
	}
	m.Cluster = cl
	return m, nil
}

// StartAndSync runs the member's cache on a context derived from ctx, which must live
// as long as the member should (not one reconcile call), and waits up to
// syncTimeout for informers of objs to sync. On error the member is stopped.
func (m *Member) StartAndSync(ctx context.Context, syncTimeout time.Duration, objs ...client.Object) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	m.mu.Lock()
	m.ctx, m.cancel, m.done = ctx, cancel, done
	m.mu.Unlock()
	m.objects.reset()
	go func() {
		defer close(done)
		if err := m.Cluster.Start(ctx); err != nil {
			m.log.Error(err, "Member cache stopped with an error")
		}
	}()

	syncCtx, cancelSync := context.WithTimeout(ctx, syncTimeout)
	defer cancelSync()
	for _, obj := range objs {
		if err := m.syncInformer(syncCtx, obj); err != nil {
			m.Stop()
			return m.syncError(obj, syncTimeout, err)
		}
	}
	if err := m.TooManyObjects(); err != nil {
		m.Stop()
		return err
	}
	return nil
}

func (m *Member) syncError(obj client.Object, timeout time.Duration, err error) error {
	if tooMany := m.TooManyObjects(); tooMany != nil {
		return tooMany
	}
	kind := fmt.Sprintf("%T", obj)
	if gvk, gerr := apiutil.GVKForObject(obj, m.GetScheme()); gerr == nil {
		kind = gvk.Kind
	}
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("%w: %s", ErrKindMissing, kind)
	}
	m.mu.Lock()
	last := m.watchErr
	m.mu.Unlock()
	if refused := m.takeRefusal(); refused != nil {
		// The watch's decoder keeps only the text of the error it read.
		last = refused
	}
	if last != nil {
		return fmt.Errorf("%w: %s within %s: %w", ErrSyncTimeout, kind, timeout, last)
	}
	return fmt.Errorf("%w: %s within %s: %w", ErrSyncTimeout, kind, timeout, err)
}

// Context is the member's context: it ends when the member is stopped.
// It is nil before Start.
func (m *Member) Context() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctx
}

// Stop cancels the member's context, waits for its cache (if started) to
// stop, and closes its connections. It is safe to call
// more than once, and on a member that never started.
func (m *Member) Stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	m.requests.close()
	if cancel != nil {
		cancel()
		<-done
	}
	m.conns.closeAll()
	// client-go's round trippers hide CloseIdleConnections from http.Client.
	utilnet.CloseIdleConnectionsFor(m.httpClient.Transport)
}

// Drain refuses the member's new requests, waits until those in flight have
// been answered (or ctx ends), and then stops the member. Once it returns
// without error, nothing more reaches the member from this process; a
// request begun before may still be on the wire when ctx ends first.
func (m *Member) Drain(ctx context.Context) error {
	m.requests.close()
	err := m.requests.wait(ctx)
	m.Stop()
	if err != nil {
		return fmt.Errorf("member %q: drain: %w", m.name, err)
	}
	return nil
}

// inFlight counts requests and, once closed, refuses new ones.
type inFlight struct {
	mu     sync.Mutex
	n      int
	closed bool
	// idle is closed when n falls to zero after close.
	idle chan struct{}
}

func (f *inFlight) begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.n++
	return true
}

func (f *inFlight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.closed && f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

func (f *inFlight) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// wait returns once no request is in flight after close, or ctx ends.
func (f *inFlight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrMemberStopped is returned for a request to a member after Stop.
var ErrMemberStopped = errors.New("member stopped")

// stoppable refuses requests once its member is stopped, with an error that
// says so, instead of letting them fail on a closed connection, and carries
// the token of SetToken.
type stoppable struct {
	member *Member
	next   http.RoundTripper
}

func (s *stoppable) RoundTrip(req *http.Request) (*http.Response, error) {
	if !s.member.requests.begin() {
		return nil, fmt.Errorf("%w: %s", ErrMemberStopped, s.member.name)
	}
	defer s.member.requests.end()
	if s.member.gate != nil {
		if err := s.member.gate(); err != nil {
			return nil, fmt.Errorf("member %s: %w", s.member.name, err)
		}
	}
	if token := s.member.token.Load(); token != nil {
		// Below client-go's bearer auth: replace what it set.
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := s.next.RoundTrip(req)
	if isProbe(req) {
		return resp, err
	}
	if err != nil {
		s.member.noteRefusal(err)
		return nil, err
	}
	resp.Body = &refusalNoter{ReadCloser: resp.Body, member: s.member}
	return resp, nil
}

// noteRefusal remembers err if it refuses an answer of the member, so that
// a refusal in a watch or a reconcile, whose errors are not the probe's,
// still reaches the member's status (see takeRefusal).
func (m *Member) noteRefusal(err error) {
	if errors.Is(err, connect.ErrResponseTooLarge) || errors.Is(err, connect.ErrRedirectRefused) {
		m.refused.Store(&err)
	}
}

// takeRefusal returns, and forgets, the latest refusal noted.
func (m *Member) takeRefusal() error {
	if err := m.refused.Swap(nil); err != nil {
		return *err
	}
	return nil
}

// refusalNoter notes the refusals its body's reads fail with.
type refusalNoter struct {
	io.ReadCloser
	member *Member
}

func (r *refusalNoter) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		r.member.noteRefusal(err)
	}
	return n, err
}

// SetToken makes the member's next requests carry token instead of its
// config's bearer token, keeping its caches, watches and connections. It
// changes nothing and reports false unless the member authenticates with a
// bearer token and token is not empty.
func (m *Member) SetToken(token string) bool {
	if !m.bearer || token == "" {
		return false
	}
	m.token.Store(&token)
	return true
}

// WrappedRoundTripper lets client-go's utilities reach the transport below.
func (s *stoppable) WrappedRoundTripper() http.RoundTripper { return s.next }

// connections dials the member's connections and closes all of them when
// the member stops. Closing idle connections is not enough: a dial begun for
// a request cancelled during Stop can still land in the pool afterwards.
type connections struct {
	// dial is the config's dialer (see Dialer).
	dial   func(ctx context.Context, network, address string) (net.Conn, error)
	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
}

func (c *connections) dialTracked(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := c.dial(ctx, network, address)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = conn.Close()
		return nil, ErrMemberStopped
	}
	tracked := &trackedConn{Conn: conn, owner: c}
	c.open[tracked] = struct{}{}
	return tracked, nil
}

func (c *connections) closeAll() {
	c.mu.Lock()
	c.closed = true
	open := c.open
	c.open = map[net.Conn]struct{}{}
	c.mu.Unlock()
	for conn := range open {
		_ = conn.Close()
	}
}

// trackedConn leaves its owner's set when closed.
type trackedConn struct {
	net.Conn
	owner *connections
	once  sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.owner.mu.Lock()
		delete(t.owner.open, t)
		t.owner.mu.Unlock()
	})
	return t.Conn.Close()
}

// recordWatchError keeps err, the last error of a cache's list or watch, for
// the error of a sync that times out, and logs it as client-go does. Both
// take it bounded (boundedError): it may quote the member at the length of
// an answer's bound, and it is kept while the member is engaged.
func (m *Member) recordWatchError(ctx context.Context, r *toolscache.Reflector, err error) {
	if err != io.EOF && err != io.ErrUnexpectedEOF { // client-go tells a closed watch by equality
		err = boundedError(err)
	}
	m.mu.Lock()
	m.watchErr = err
	m.mu.Unlock()
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

// deadline bounds every request but watches by timeout (zero: no bound),
// unless its context ends sooner. A list or write to a member that accepts
// connections and never answers then fails in time and frees its worker.
type deadline struct {
	timeout time.Duration
	next    http.RoundTripper
}

func (d *deadline) RoundTrip(req *http.Request) (*http.Response, error) {
	if d.timeout <= 0 || connect.IsWatch(req) {
		return d.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), d.timeout)
	resp, err := d.next.RoundTrip(req.WithContext(ctx))
	if err == nil && ctx.Err() != nil {
		// net/http hands on an answer that raced the request's end, such as
		// the empty one a stuck server sends when the connection closes: the
		// request failed by its deadline all the same.
		_ = resp.Body.Close()
		resp, err = nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// WrappedRoundTripper lets client-go's utilities reach the transport below.
func (d *deadline) WrappedRoundTripper() http.RoundTripper { return d.next }

// cancelOnClose releases a request's deadline once its body is read and closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

// boundedError is err with the member's words bounded and printable
// (v1alpha1.PrintableError) wherever it is printed. An err that holds a
// member's Status becomes a copy of that Status with its message bounded and
// no details, behind the words that wrapped it, so that the member's text is
// not kept either: errors.As finds the Status (its code and reason, which
// the hub reports), not what else err wrapped. Any other err is kept whole.
func boundedError(err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return v1alpha1.PrintableError(err)
	}
	s := status.Status()
	s.Message, s.Details = v1alpha1.TruncateMessage(s.Message), nil
	prefix := ""
	if se, ok := status.(error); ok {
		prefix, _, _ = strings.Cut(err.Error(), se.Error()) // the words that wrap it: client-go's
	}
	return v1alpha1.PrintableError(fmt.Errorf("%s%w", v1alpha1.TruncateMessage(prefix), &apierrors.StatusError{ErrStatus: s}))
}
