package members

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// connection is what the engine needs of one member's connection: a
// controller-runtime cluster with health checks, a bounded start, a drain
// and token renewal. *clusters.Member is the one the provider makes.
type connection interface {
	cluster.Cluster
	// Preflight checks the member (version, readiness, the kinds of objs
	// served and listable), each step bounded by stepTimeout, and returns
	// its version.
	Preflight(ctx context.Context, stepTimeout time.Duration, objs ...client.Object) (string, error)
	// StartAndSync starts the caches on a context derived from ctx and
	// waits up to syncTimeout for those of objs.
	StartAndSync(ctx context.Context, syncTimeout time.Duration, objs ...client.Object) error
	// Context ends when the connection stops.
	Context() context.Context
	// TooManyObjects fails once the caches passed their bound on objects.
	TooManyObjects() error
	// SetToken makes later requests carry token; false when it cannot.
	SetToken(token string) bool
	// RenewToken asks the member for a token like the one claims describe.
	RenewToken(ctx context.Context, claims connect.TokenClaims, lifetime time.Duration) (string, time.Time, error)
	// Drain refuses new requests, waits for those in flight, then stops.
	Drain(ctx context.Context) error
	// Stop stops the caches and closes every connection.
	Stop()
}

// connector makes a member's connection from its config: with caches, to
// engage it, or without, to probe it while it is parked. gate is checked
// before every request.
type connector func(name string, cfg *connect.Config, gate func() error, caches bool, log logr.Logger) (connection, error)

// memberState is where a member stands on this replica.
type memberState int

const (
	// idle: served here but not engaged: not yet, or its last engagement
	// failed, or its registration cannot be used.
	idle memberState = iota
	// engaged: its caches run and its Widgets are reconciled.
	engaged
	// parked: it failed FailureThreshold probes in a row, or its caches
	// passed the bound on objects: caches stopped, connections closed, only
	// probed until it answers again.
	parked
)

func (s memberState) String() string {
	return [...]string{"idle", "engaged", "parked"}[s]
}

// memberEnv is what every member of one provider shares.
type memberEnv struct {
	opts    *Options
	connect connector
	// gate is the ownership's check for a member served in a term.
	gate func(term uint64) func() error
	// runCtx is the provider's: a member's caches live until it ends.
	runCtx context.Context
	aware  multicluster.Aware
	// recorder records Events on the registering objects.
	recorder events.EventRecorder
	// index applies the provider's field indexers to conn, then runs commit,
	// both under the indexers' lock, so that no indexer added meanwhile is
	// missed.
	index func(conn connection, commit func()) error
}

// member is one member this replica serves, from the first reconcile that
// serves it until its registration goes, it is handed over or the provider
// stops: its connection (engaged, or a prober while parked), what it was
// engaged with, and what its probes and renewals have seen. Its methods are
// the transitions of docs/member-health.md. They are called by the
// reconciles of the registration that holds its name, one at a time (a
// registration is one key of the queue); mu guards what others read (Get,
// the Widget controller's outcomes) or end (leave).
type member struct {
	name multicluster.ClusterName
	env  *memberEnv
	log  logr.Logger

	// failing are its Widgets whose latest reconcile failed (RecordOutcome).
	failing failingWidgets

	mu    sync.Mutex
	state memberState
	conn  connection
	// gone is set once the member is no longer served here: an engagement
	// that ends later stops at once.
	gone bool
	engagement

	// What the probes of the current engagement saw, and its renewals:
	// read and written by its reconciles only.
	failures  int
	lastError string
	probedAt  time.Time
	probed    observation
	renewal   renewal
}

// engagement is what a member was engaged with, kept while it is parked.
type engagement struct {
	// hash is the Registration.Hash it was engaged with, cfg the config
	// built from it, term the ownership term it is served in.
	hash [sha256.Size]byte
	cfg  *connect.Config
	term uint64
	// since is when the engagement began; version the member's last known.
	since   time.Time
	version string
}

func newMember(name multicluster.ClusterName, env *memberEnv, log logr.Logger) *member {
	return &member{name: name, env: env, log: log}
}

// change is what a reconcile asks of a member: to serve the registration
// whose Hash is hash, in term.
type change struct {
	hash [sha256.Size]byte
	term uint64
	// config builds the member's config when it is engaged afresh.
	config func() (*connect.Config, error)
	// announce shows on the hub that the member is being engaged afresh
	// (replacing: its engagement or parking with another registration ends)
	// and returns the MemberCluster it wrote, nil when it wrote none.
	announce func(replacing bool) *v1alpha1.MemberCluster
}

// sync takes the member one step towards c and returns what it saw: a probe
// of the engaged member, a probe of the parked one (engaged afresh once it
// answers), a token swapped in place, or an engagement afresh (a new member,
// a changed registration, a new term). Its checks run under memberCtx, which
// the queue may cancel; a drain of the previous term under ctx.
func (m *member) sync(ctx, memberCtx context.Context, c change) observation {
	state, conn, was := m.current()
	same := was.hash == c.hash && was.term == c.term
	if same && state != idle {
		var obs observation
		if state == engaged {
			obs = m.probe(memberCtx, conn)
		} else {
			obs = m.probeParked(memberCtx, conn)
		}
		obs.tokenExpiry = was.cfg.TokenExpiry
		return obs
	}
	cfg, err := c.config()
	if err != nil {
		m.disengage("registration is not usable")
		return refused(err)
	}
	if state == engaged && was.term == c.term && m.swapToken(cfg, c.hash) {
		return observation{ready: true, reason: v1alpha1.MemberEngagedReason,
			message: fmt.Sprintf("engaged through context %q; token replaced", cfg.Context),
			version: was.version, widgets: unknownWidgets, tokenExpiry: cfg.TokenExpiry,
			result: reconcile.Result{RequeueAfter: m.env.opts.ProbeInterval}}
	}
	written := c.announce(state != idle && was.hash != c.hash)
	if state != idle && was.term != c.term {
		// Served in an earlier term: its requests of that term are answered
		// before any of the new one is sent.
		m.drain(ctx, "its ownership term changed")
	} else {
		m.disengage("kubeconfig changed")
	}
	obs := m.engage(memberCtx, engagement{hash: c.hash, cfg: cfg, term: c.term})
	obs.tokenExpiry, obs.written = cfg.TokenExpiry, written
	return obs
}

// current returns the member's state, connection and engagement.
func (m *member) current() (memberState, connection, engagement) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.conn, m.engagement
}

// reengageWait is how long a changed registration (whose hash is hash) must
// wait before the member is engaged again: zero unless it is engaged or
// parked with another one engaged less than MinReengageInterval ago.
func (m *member) reengageWait(hash [sha256.Size]byte) time.Duration {
	state, _, was := m.current()
	if state == idle || was.hash == hash {
		return 0
	}
	return m.env.opts.MinReengageInterval - time.Since(was.since)
}

// cluster is the engaged member's connection, nil unless engaged.
func (m *member) cluster() connection {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != engaged {
		return nil
	}
	return m.conn
}

// engage checks the member with e's config, starts its caches with a bound
// and engages it with the multicluster manager. The caches live as long as
// the provider runs, but the checks and the sync end with ctx: when ctx ends
// first, the connection is stopped (so that a request without a deadline of
// ctx's, discovery say, fails at once) and nothing is engaged.
func (m *member) engage(ctx context.Context, e engagement) observation {
	opts := m.env.opts
	conn, err := m.env.connect(string(m.name), e.cfg, m.env.gate(e.term), true, m.log)
	if err != nil {
		return observation{reason: v1alpha1.MemberInvalidKubeconfigReason, message: err.Error(), err: reconcile.TerminalError(err)}
	}
	start := time.Now()
	stopOnCancel := context.AfterFunc(ctx, conn.Stop)
	version, err := conn.Preflight(ctx, opts.ProbeTimeout, opts.WatchedObjects...)
	if err == nil {
		err = conn.StartAndSync(m.env.runCtx, opts.SyncTimeout, opts.WatchedObjects...)
	}
	if !stopOnCancel() {
		// ctx ended while the member was checked or synced: it is being
		// stopped, and whatever failed, failed because of that.
		took := time.Since(start).Round(time.Millisecond)
		if err == nil {
			err = fmt.Errorf("%w after %s, its cache synced", context.Cause(ctx), took)
		} else {
			err = fmt.Errorf("%w after %s: %w", context.Cause(ctx), took, err)
		}
	}
	if err != nil {
		conn.Stop()
		return m.engageFailed(err, version)
	}

	e.version, e.since = version, time.Now()
	if err := m.commit(conn, e); err != nil {
		conn.Stop()
		return observation{reason: v1alpha1.MemberUnreachableReason, message: err.Error(), err: err}
	}
	if err := m.env.aware.Engage(conn.Context(), m.name, conn); err != nil {
		m.disengage("engage failed")
		return observation{reason: v1alpha1.MemberUnreachableReason, message: err.Error(), err: fmt.Errorf("engage member %q: %w", m.name, err)}
	}
	memberEngagedSince.WithLabelValues(string(m.name)).Set(float64(e.since.Unix()))
	startCounters(string(m.name))
	message := fmt.Sprintf("engaged through context %q", e.cfg.Context)
	if e.cfg.Contexts > 1 {
		message += fmt.Sprintf(" (the current context of %d)", e.cfg.Contexts)
	}
	m.log.Info("Engaged member", "context", e.cfg.Context, "host", e.cfg.REST.Host,
		"version", v1alpha1.Printable(version, v1alpha1.MaxVersionLength), "took", time.Since(start).Round(time.Millisecond))
	obs := observation{ready: true, reason: v1alpha1.MemberEngagedReason, message: message, version: version,
		widgets: countWidgets(ctx, conn), result: reconcile.Result{RequeueAfter: opts.ProbeInterval}}
	m.probedAt, m.probed = time.Now(), obs // engaging checked what a probe checks
	return obs
}

// errNotServed: the member stopped being served here while it was engaged.
var errNotServed = errors.New("the member is no longer served by this replica")

// commit makes conn the member's engaged connection, unless the member is
// no longer served here.
func (m *member) commit(conn connection, e engagement) error {
	gone := false
	err := m.env.index(conn, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if gone = m.gone; gone {
			return
		}
		m.state, m.conn, m.engagement = engaged, conn, e
		m.failures, m.lastError = 0, ""
		m.failing.reset()
	})
	if err == nil && gone {
		err = errNotServed
	}
	return err
}

// engageFailed is the outcome of an engagement that failed with err.
func (m *member) engageFailed(err error, version string) observation {
	opts := m.env.opts
	obs := failed(err)
	obs.version = version
	switch obs.reason {
	case v1alpha1.MemberWidgetCRDMissingReason:
		// Waiting on something external: look again later, no error.
		m.log.Info("Member does not serve the Widget API yet", "retryAfter", opts.MissingKindRetry)
		obs.result, obs.err = reconcile.Result{RequeueAfter: opts.MissingKindRetry}, nil
	case v1alpha1.MemberTooManyObjectsReason:
		// Tried again after MaxRetryDelay, not with the backoff of errors:
		// a member that stays too big costs one list of at most the bound
		// per MaxRetryDelay.
		m.log.Info("Member has more objects than the hub holds per member", "maxObjects", opts.MaxObjects, "retryAfter", opts.MaxRetryDelay)
		obs.result, obs.err = reconcile.Result{RequeueAfter: opts.MaxRetryDelay}, nil
	default:
		obs.err = fmt.Errorf("engage member %q: %w", m.name, err)
	}
	return obs
}

// swapToken makes the engaged member's next requests carry cfg's bearer
// token, keeping its caches and connections, when only the token differs
// from the config it was engaged with; it tells whether it did.
func (m *member) swapToken(cfg *connect.Config, hash [sha256.Size]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Left meanwhile (handed over, displaced, shut down): nothing to swap into.
	if m.gone || m.state != engaged || m.conn == nil || !m.cfg.SameServerAndIdentity(cfg) || !m.conn.SetToken(cfg.REST.BearerToken) {
		return false
	}
	// The next probe, at its interval, tries the new token.
	m.log.Info("Swapped the member's token in place")
	m.hash, m.cfg = hash, cfg
	return true
}

// probe checks the engaged member with the checks of its engagement, so
// that a member that loses its RBAC or its CRD is seen, not only one that
// stops answering. After FailureThreshold failures in a row, or once its
// caches passed the bound on objects, it is parked.
func (m *member) probe(ctx context.Context, conn connection) observation {
	opts := m.env.opts
	if err := conn.TooManyObjects(); err != nil {
		m.log.Info("Member's caches passed the bound on objects; parking it", "maxObjects", opts.MaxObjects)
		obs := failed(err)
		obs.version, obs.widgets, obs.err = m.version, unknownWidgets, nil
		obs.result = reconcile.Result{RequeueAfter: opts.ProbeInterval}
		m.park(obs.reason)
		return obs
	}
	if since := time.Since(m.probedAt); since < opts.ProbeInterval/2 {
		// Probed a moment ago (a registration event came between two
		// probes): say the same again rather than probe the member more
		// often than the interval, however often the registration changes.
		obs := m.probed
		obs.result = reconcile.Result{RequeueAfter: opts.ProbeInterval - since}
		return obs
	}
	obs := m.probeNow(ctx, conn)
	now := time.Now()
	if !m.probedAt.IsZero() {
		obs.late = min(max(0, now.Sub(m.probedAt)-opts.ProbeInterval), opts.ProbeInterval)
	}
	m.probedAt, m.probed = now, obs
	return obs
}

func (m *member) probeNow(ctx context.Context, conn connection) observation {
	opts := m.env.opts
	start := time.Now()
	version, err := conn.Preflight(ctx, opts.ProbeTimeout, opts.WatchedObjects...)
	memberProbeDuration.WithLabelValues(string(m.name)).Observe(time.Since(start).Seconds())
	next := reconcile.Result{RequeueAfter: opts.ProbeInterval}
	if err == nil {
		m.failures, m.lastError = 0, ""
		m.mu.Lock()
		m.version = version
		m.mu.Unlock()
		widgets := countWidgets(ctx, conn)
		obs := observation{ready: true, reason: v1alpha1.MemberEngagedReason, message: fmt.Sprintf("engaged through context %q", m.cfg.Context),
			version: version, widgets: widgets, result: next}
		if failing := m.failing.count(); degraded(failing, widgets) {
			obs.ready, obs.reason = false, v1alpha1.MemberDegradedReason
			obs.message = fmt.Sprintf("answers its probes, but the latest reconcile failed for %d of its %d Widgets; see the Widgets' Ready conditions", failing, widgets)
		}
		return obs
	}
	memberProbeFailures.WithLabelValues(string(m.name)).Inc()
	m.failures++
	m.lastError = withoutMemberText(err)
	if m.failures < opts.FailureThreshold {
		m.log.V(1).Info("Probe failed", "failures", m.failures, "error", m.lastError)
		return observation{ready: true, reason: v1alpha1.MemberEngagedReason, message: "engaged; last probe failed: " + m.lastError,
			version: m.version, widgets: countWidgets(ctx, conn), result: next}
	}
	obs := failed(err)
	obs.version, obs.widgets, obs.result, obs.err = m.version, unknownWidgets, next, nil
	obs.message = fmt.Sprintf("%d probes in a row failed: %s", m.failures, obs.message)
	m.park(obs.reason)
	return obs
}

// park stops the engaged member: its caches stop, its connections close
// (so its requests in flight fail at once), and its queued requests are
// dropped as it is no longer engaged. Nothing is retried against it until a
// probe passes; then it is engaged afresh, its caches relist, and every
// Widget changed meanwhile is reconciled.
func (m *member) park(why string) {
	prober, err := m.env.connect(string(m.name), m.cfg, m.env.gate(m.term), false, m.log)
	m.disengage("parked: " + why)
	if err != nil {
		return // the next reconcile engages it from its registration again
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		prober.Stop()
		return
	}
	m.state, m.conn = parked, prober
}

// probeParked probes the parked member and engages it afresh once it passes.
func (m *member) probeParked(ctx context.Context, prober connection) observation {
	opts := m.env.opts
	start := time.Now()
	_, err := prober.Preflight(ctx, opts.ProbeTimeout, opts.WatchedObjects...)
	memberProbeDuration.WithLabelValues(string(m.name)).Observe(time.Since(start).Seconds())
	if err != nil {
		memberProbeFailures.WithLabelValues(string(m.name)).Inc()
		obs := failed(err)
		obs.version, obs.widgets, obs.result, obs.err = m.version, unknownWidgets, reconcile.Result{RequeueAfter: opts.ProbeInterval}, nil
		obs.message = "parked until it passes a probe: " + obs.message
		return obs
	}
	m.log.Info("Parked member passes its probe; engaging it afresh")
	e := m.engagement
	m.disengage("member answers again")
	return m.engage(ctx, e)
}

// disengage ends the member's engagement or parking, if any, at once; it
// stays served (idle) and is engaged again from its registration.
func (m *member) disengage(why string) {
	m.mu.Lock()
	state, conn := m.state, m.conn
	m.state, m.conn = idle, nil
	m.mu.Unlock()
	if conn == nil {
		return
	}
	conn.Stop()
	if state == engaged {
		memberEngagedSince.WithLabelValues(string(m.name)).Set(0)
		m.log.Info("Disengaged member", "why", why)
	}
}

// drain ends the member's engagement after its requests in flight are
// answered (within DrainTimeout), or its parking at once; it stays served.
func (m *member) drain(ctx context.Context, why string) {
	m.mu.Lock()
	state, conn := m.state, m.conn
	m.state, m.conn = idle, nil
	m.mu.Unlock()
	m.end(ctx, state, conn, m.env.opts.DrainTimeout, why)
}

// leave stops serving the member for good: an engagement or parking ends,
// the engaged member drained first for up to drain (zero: stopped at once),
// and an engagement under way stops as it ends.
func (m *member) leave(ctx context.Context, drain time.Duration, why string) {
	m.mu.Lock()
	state, conn := m.state, m.conn
	m.state, m.conn, m.gone = idle, nil, true
	m.mu.Unlock()
	m.end(ctx, state, conn, drain, why)
}

// end stops conn, the member's connection in state, draining it first for
// up to drain when it was engaged.
func (m *member) end(ctx context.Context, state memberState, conn connection, drain time.Duration, why string) {
	if conn == nil {
		return
	}
	if state != engaged || drain <= 0 {
		conn.Stop()
	} else {
		ctx, cancel := context.WithTimeout(ctx, drain)
		defer cancel()
		if err := conn.Drain(ctx); err != nil {
			m.log.Error(err, "Member requests still in flight when its drain timed out")
		}
	}
	if state == engaged {
		memberEngagedSince.WithLabelValues(string(m.name)).Set(0)
		m.log.Info("Disengaged member", "why", why)
	}
}

// unknownWidgets is an observation's widgets when they were not counted.
const unknownWidgets = -1

// countWidgets counts the member's Widgets from its cache, unknownWidgets
// when it cannot.
func countWidgets(ctx context.Context, conn connection) int32 {
	list := &v1alpha1.WidgetList{}
	if err := conn.GetClient().List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return unknownWidgets
	}
	return int32(len(list.Items))
}

// refused is the outcome of a registration whose config cannot be built:
// not retried until the registration changes.
func refused(err error) observation {
	return observation{reason: refusalReason(err), message: err.Error(), err: reconcile.TerminalError(err)}
}
