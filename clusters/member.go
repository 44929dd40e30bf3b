package clusters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// stopGrace bounds how long Stop waits for requests in flight.
const stopGrace = 10 * time.Second

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
	transport  *stoppable
	log        logr.Logger

	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	watchErr error
	stopped  atomic.Bool
}

// New builds a Member named name from cfg; it does not contact the member.
func New(name string, cfg *Config, scheme *runtime.Scheme, log logr.Logger) (*Member, error) {
	m := &Member{name: name, log: log}
	restCfg := rest.CopyConfig(cfg.REST)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		m.transport = &stoppable{member: m, next: rt}
		return m.transport
	})
	httpClient, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		return nil, fmt.Errorf("member %q: http client: %w", name, err)
	}
	m.httpClient = httpClient
	cl, err := cluster.New(restCfg, func(o *cluster.Options) {
		o.Scheme = scheme
		o.HTTPClient = httpClient
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

// Name is the member's cluster name.
func (m *Member) Name() string { return m.name }

// StartAndSync runs the member's cache on a context derived from ctx, which must live
// as long as the member should (not one reconcile call), and waits up to
// syncTimeout for informers of objs to sync. On error the member is stopped.
func (m *Member) StartAndSync(ctx context.Context, syncTimeout time.Duration, objs ...client.Object) error {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	m.mu.Lock()
	m.ctx, m.cancel, m.done = ctx, cancel, done
	m.mu.Unlock()
	go func() {
		defer close(done)
		if err := m.Cluster.Start(ctx); err != nil {
			m.log.Error(err, "Member cache stopped with an error")
		}
	}()

	syncCtx, cancelSync := context.WithTimeout(ctx, syncTimeout)
	defer cancelSync()
	for _, obj := range objs {
		if _, err := m.GetCache().GetInformer(syncCtx, obj); err != nil {
			m.Stop()
			return m.syncError(obj, syncTimeout, err)
		}
	}
	return nil
}

func (m *Member) syncError(obj client.Object, timeout time.Duration, err error) error {
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

// Done is closed when the member's cache has stopped.
func (m *Member) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Stop cancels the member's context, waits for its cache (if started) and its
// requests in flight to stop, and closes its connections. It is safe to call
// more than once, and on a member that never started.
func (m *Member) Stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	m.stopped.Store(true)
	if cancel != nil {
		cancel()
		<-done
	}
	m.transport.waitIdle(stopGrace)
	// client-go's round trippers hide CloseIdleConnections from http.Client.
	utilnet.CloseIdleConnectionsFor(m.httpClient.Transport)
}

// ErrMemberStopped is returned for a request to a member after Stop.
var ErrMemberStopped = errors.New("member stopped")

// stoppable refuses requests once its member is stopped and counts the
// requests in flight, so that Stop can wait for them before it closes the
// member's connections: nothing a reconcile still holding the member does may
// leave a connection behind.
type stoppable struct {
	member *Member
	next   http.RoundTripper

	mu       sync.Mutex
	inFlight int
}

func (s *stoppable) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.member.stopped.Load() {
		return nil, fmt.Errorf("%w: %s", ErrMemberStopped, s.member.name)
	}
	s.add(1)
	resp, err := s.next.RoundTrip(req)
	if err != nil {
		s.add(-1)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { s.add(-1) }}
	return resp, nil
}

func (s *stoppable) add(n int) {
	s.mu.Lock()
	s.inFlight += n
	s.mu.Unlock()
}

// waitIdle waits up to timeout for the requests in flight to finish.
func (s *stoppable) waitIdle(timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		n := s.inFlight
		s.mu.Unlock()
		if n == 0 {
			return
		}
	}
}

// WrappedRoundTripper lets client-go's utilities reach the transport below.
func (s *stoppable) WrappedRoundTripper() http.RoundTripper { return s.next }

// countedBody calls done once, when the body is closed or read to its end.
type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

func (m *Member) recordWatchError(ctx context.Context, r *toolscache.Reflector, err error) {
	m.mu.Lock()
	m.watchErr = err
	m.mu.Unlock()
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}
