package members

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
)

// The per-member state machine (docs/member-health.md, "States and
// transitions") against fake connections: each test drives one member
// through sync, as its registration's reconciles do, and checks where it
// stands, what it reports and what it did to its connections. The
// thresholds are the documented defaults, written out as numbers, so that a
// changed default fails here.

// fakeConn is a member connection whose answers a test sets.
type fakeConn struct {
	cluster.Cluster // not used by the engine but for GetClient, below

	caches bool // made to be engaged (with caches) or to probe a parked member
	mu     sync.Mutex
	// preflight, sync and tooMany are what Preflight, StartAndSync and
	// TooManyObjects answer.
	preflight, sync, tooMany error
	widgets                  int
	// preflights counts the Preflights; tokens the SetToken calls.
	preflights    int
	started       bool
	stopped       bool
	drained       bool
	tokens        []string
	renewed       int
	renewAnswer   string
	renewFailures error
	ctx           context.Context
	cancel        context.CancelFunc
}

func newFakeConn(caches bool) *fakeConn {
	ctx, cancel := context.WithCancel(context.Background())
	return &fakeConn{caches: caches, widgets: 3, ctx: ctx, cancel: cancel}
}

func (f *fakeConn) Preflight(context.Context, time.Duration, ...client.Object) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preflights++
	return "v1.36.3", f.preflight
}

func (f *fakeConn) StartAndSync(context.Context, time.Duration, ...client.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = true
	return f.sync
}

func (f *fakeConn) Context() context.Context { return f.ctx }

func (f *fakeConn) TooManyObjects() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tooMany
}

func (f *fakeConn) SetToken(token string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = append(f.tokens, token)
	return true
}

func (f *fakeConn) RenewToken(context.Context, connect.TokenClaims, time.Duration) (string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewed++
	return f.renewAnswer, time.Time{}, f.renewFailures
}

func (f *fakeConn) Drain(context.Context) error {
	f.mu.Lock()
	f.drained = true
	f.mu.Unlock()
	f.Stop()
	return nil
}

func (f *fakeConn) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	f.cancel()
}

func (f *fakeConn) set(do func(*fakeConn)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do(f)
}

func (f *fakeConn) GetClient() client.Client { return widgetCounter{f: f} }

// widgetCounter answers a list of Widgets with the connection's count; the
// engine reads nothing else of a member's client.
type widgetCounter struct {
	client.Client
	f *fakeConn
}

func (w widgetCounter) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	list.(*v1alpha1.WidgetList).Items = make([]v1alpha1.Widget, w.f.widgets)
	return nil
}

// machine is one member under test, its connections and what was engaged.
type machine struct {
	t *testing.T
	m *member
	// conns are the connections made, in order; next is what the next one
	// answers (set before a sync), connectErr what connecting answers.
	conns      []*fakeConn
	next       func(*fakeConn)
	connectErr error
	engaged    []cluster.Cluster
	announced  []bool
	recorder   *events.FakeRecorder
}

func newMachine(t *testing.T, o func(*Options)) *machine {
	t.Helper()
	opts := Options{Scheme: clusters.NewScheme(), WatchedObjects: []client.Object{&v1alpha1.Widget{}}}
	if o != nil {
		o(&opts)
	}
	opts.defaults()
	mc := &machine{t: t, recorder: events.NewFakeRecorder(100)}
	env := &memberEnv{opts: &opts, connect: mc.connect, runCtx: t.Context(), aware: mc, recorder: mc.recorder,
		gate:  func(uint64) func() error { return nil },
		index: func(_ connection, commit func()) error { commit(); return nil }}
	mc.m = newMember("m", env, logr.Discard())
	return mc
}

func (mc *machine) connect(_ string, _ *connect.Config, _ func() error, caches bool, _ logr.Logger) (connection, error) {
	if mc.connectErr != nil {
		return nil, mc.connectErr
	}
	c := newFakeConn(caches)
	if mc.next != nil {
		mc.next(c)
	}
	mc.conns = append(mc.conns, c)
	return c, nil
}

// Engage is the multicluster manager's, recording what it engages.
func (mc *machine) Engage(_ context.Context, _ multicluster.ClusterName, cl cluster.Cluster) error {
	mc.engaged = append(mc.engaged, cl)
	return nil
}

// last is the latest connection made.
func (mc *machine) last() *fakeConn {
	mc.t.Helper()
	if len(mc.conns) == 0 {
		mc.t.Fatal("no connection made")
	}
	return mc.conns[len(mc.conns)-1]
}

// config is a member config with token, which expires in a day.
func config(token string) *connect.Config {
	return &connect.Config{Context: "c", REST: &rest.Config{Host: "https://member:6443", BearerToken: token},
		TokenExpiry: time.Now().Add(24 * time.Hour).Truncate(time.Second)}
}

// wantTokenExpiry checks that every observation tells when the token expires.
func wantTokenExpiry(t *testing.T, obs observation, cfg *connect.Config) {
	t.Helper()
	if !obs.tokenExpiry.Equal(cfg.TokenExpiry) {
		t.Errorf("observed token expiry %s, want the config's %s", obs.tokenExpiry, cfg.TokenExpiry)
	}
}

// sync runs one reconcile's step for the registration of config cfg (its
// hash from the token and server), in term.
func (mc *machine) sync(cfg *connect.Config, term uint64) observation {
	mc.t.Helper()
	return mc.m.sync(mc.t.Context(), mc.t.Context(), change{hash: sha256.Sum256([]byte(cfg.REST.Host + cfg.REST.BearerToken)), term: term,
		config: func() (*connect.Config, error) { return cfg, nil },
		announce: func(replacing bool) *v1alpha1.MemberCluster {
			mc.announced = append(mc.announced, replacing)
			return nil
		}})
}

// probeNow makes the next sync probe rather than repeat the last probe.
func (mc *machine) probeNow() { mc.m.probedAt = time.Time{} }

func (mc *machine) wantState(want memberState) {
	mc.t.Helper()
	if got, _, _ := mc.m.current(); got != want {
		mc.t.Fatalf("member is %s, want %s", got, want)
	}
}

func wantObs(t *testing.T, obs observation, ready bool, reason string) {
	t.Helper()
	if obs.ready != ready || obs.reason != reason {
		t.Fatalf("observed ready=%v %s (%s, err %v), want ready=%v %s", obs.ready, obs.reason, obs.message, obs.err, ready, reason)
	}
}

// A new member is checked, its caches started and it is engaged, once.
func TestNewMemberIsEngaged(t *testing.T) {
	mc := newMachine(t, nil)
	cfg := config("t1")
	obs := mc.sync(cfg, 0)
	wantObs(t, obs, true, v1alpha1.MemberEngagedReason)
	wantTokenExpiry(t, obs, cfg)
	mc.wantState(engaged)
	c := mc.last()
	if !c.caches || !c.started || len(mc.engaged) != 1 || mc.engaged[0] != connection(c) {
		t.Errorf("connection with caches %v, started %v; engaged %d times", c.caches, c.started, len(mc.engaged))
	}
	if obs.widgets != 3 || obs.version != "v1.36.3" || obs.result.RequeueAfter != 5*time.Second {
		t.Errorf("observed %d Widgets, version %q, next look after %s; want 3, v1.36.3, 5s", obs.widgets, obs.version, obs.result.RequeueAfter)
	}
	if len(mc.announced) != 1 || mc.announced[0] {
		t.Errorf("announced %v, want one engagement that replaces nothing", mc.announced)
	}
	if cl := mc.m.cluster(); cl != connection(c) {
		t.Errorf("cluster() = %v, want the engaged connection", cl)
	}
}

// Failed probes leave the member Engaged until three fail in a row; the
// third parks it: its caches stop and a prober without caches takes over.
// A probe that passes in between starts the count again.
func TestThreeFailedProbesInARowParkTheMember(t *testing.T) {
	mc := newMachine(t, nil)
	cfg := config("t1")
	mc.sync(cfg, 0)
	engagedConn := mc.last()
	down := errors.New("connection refused")
	probe := func(err error) observation {
		engagedConn.set(func(f *fakeConn) { f.preflight = err })
		mc.probeNow()
		return mc.sync(cfg, 0)
	}
	for i := 1; i <= 2; i++ {
		obs := probe(down)
		wantObs(t, obs, true, v1alpha1.MemberEngagedReason)
		wantTokenExpiry(t, obs, cfg)
		if !strings.Contains(obs.message, "last probe failed") {
			t.Errorf("failure %d: message %q does not say the last probe failed", i, obs.message)
		}
	}
	wantObs(t, probe(nil), true, v1alpha1.MemberEngagedReason) // the count starts again
	probe(down)
	probe(down)
	mc.wantState(engaged)
	obs := probe(down)
	wantObs(t, obs, false, v1alpha1.MemberUnreachableReason)
	if !strings.HasPrefix(obs.message, "3 probes in a row failed") || obs.err != nil || obs.result.RequeueAfter != 5*time.Second {
		t.Errorf("parked with %q, err %v, next probe after %s; want 3 failures said, no error, 5s", obs.message, obs.err, obs.result.RequeueAfter)
	}
	mc.wantState(parked)
	prober := mc.last()
	if !engagedConn.stopped || prober == engagedConn || prober.caches || prober.started {
		t.Errorf("engaged connection stopped %v; prober is new %v, with caches %v, started %v", engagedConn.stopped, prober != engagedConn, prober.caches, prober.started)
	}
	if mc.m.cluster() != nil {
		t.Error("a parked member is still served to the Widget controller")
	}
}

// A parked member is probed at the probe interval and stays parked while it
// fails; the first probe that passes engages it afresh, with new caches.
func TestParkedMemberIsEngagedAfreshOnceItAnswers(t *testing.T) {
	mc := newMachine(t, nil)
	cfg := config("t1")
	mc.sync(cfg, 0)
	mc.last().set(func(f *fakeConn) { f.preflight = errors.New("down") })
	for range 3 {
		mc.probeNow()
		mc.sync(cfg, 0)
	}
	mc.wantState(parked)
	prober := mc.last()
	prober.set(func(f *fakeConn) { f.preflight = errors.New("still down") })
	obs := mc.sync(cfg, 0)
	wantObs(t, obs, false, v1alpha1.MemberUnreachableReason)
	wantTokenExpiry(t, obs, cfg)
	if !strings.HasPrefix(obs.message, "parked until it passes a probe") || obs.result.RequeueAfter != 5*time.Second {
		t.Errorf("parked probe said %q, next after %s", obs.message, obs.result.RequeueAfter)
	}
	mc.wantState(parked)

	prober.set(func(f *fakeConn) { f.preflight = nil })
	obs = mc.sync(cfg, 0)
	wantObs(t, obs, true, v1alpha1.MemberEngagedReason)
	wantTokenExpiry(t, obs, cfg)
	mc.wantState(engaged)
	fresh := mc.last()
	if !prober.stopped || fresh == prober || !fresh.caches || !fresh.started || len(mc.engaged) != 2 {
		t.Errorf("prober stopped %v; fresh connection with caches %v, started %v; engaged %d times, want 2",
			prober.stopped, fresh.caches, fresh.started, len(mc.engaged))
	}
}

// A member is probed at most once per half probe interval however often its
// registration is reconciled; the answer in between is the last probe's.
func TestProbesAreNoMoreFrequentThanHalfTheInterval(t *testing.T) {
	mc := newMachine(t, nil)
	cfg := config("t1")
	mc.sync(cfg, 0)
	c := mc.last()
	for range 5 {
		mc.sync(cfg, 0)
	}
	if c.preflights != 1 {
		t.Errorf("%d checks in five reconciles right after the engagement; want only the engagement's", c.preflights)
	}
	mc.m.probedAt = time.Now().Add(-2500 * time.Millisecond) // half of 5s
	mc.sync(cfg, 0)
	if c.preflights != 2 {
		t.Errorf("%d checks once half the interval passed; want 2", c.preflights)
	}
}

// Degraded: the member answers its probes, but at least 10 of its Widgets
// failed their latest reconcile and they are more than half of them. The
// verdict is taken afresh at each probe.
func TestDegradedIsTenFailingWidgetsAndMoreThanHalf(t *testing.T) {
	for _, tc := range []struct {
		failing, widgets int
		degraded         bool
	}{
		{10, 19, true},
		{10, 20, false}, // half is not more than half
		{9, 10, false},  // fewer than 10
		{20, 21, true},
		{0, 0, false},
	} {
		t.Run(fmt.Sprintf("%d of %d", tc.failing, tc.widgets), func(t *testing.T) {
			mc := newMachine(t, nil)
			cfg := config("t1")
			mc.sync(cfg, 0)
			mc.last().set(func(f *fakeConn) { f.widgets = tc.widgets })
			for i := range tc.failing {
				mc.m.failing.record(types.NamespacedName{Namespace: "shop", Name: fmt.Sprint(i)}, true)
			}
			mc.probeNow()
			obs := mc.sync(cfg, 0)
			if tc.degraded {
				wantObs(t, obs, false, v1alpha1.MemberDegradedReason)
				if !strings.Contains(obs.message, fmt.Sprintf("%d of its %d Widgets", tc.failing, tc.widgets)) {
					t.Errorf("message %q does not count the failing Widgets", obs.message)
				}
			} else {
				wantObs(t, obs, true, v1alpha1.MemberEngagedReason)
			}
			mc.wantState(engaged) // Degraded is a verdict, not a parking
			for i := range tc.failing {
				mc.m.failing.record(types.NamespacedName{Namespace: "shop", Name: fmt.Sprint(i)}, false)
			}
			mc.probeNow()
			wantObs(t, mc.sync(cfg, 0), true, v1alpha1.MemberEngagedReason)
		})
	}
}

// A changed registration re-engages the member at most once per 5 seconds;
// an unchanged one never waits.
func TestChangedRegistrationReengagesAtMostEveryFiveSeconds(t *testing.T) {
	mc := newMachine(t, nil)
	mc.sync(config("t1"), 0)
	other := sha256.Sum256([]byte("another kubeconfig"))
	if wait := mc.m.reengageWait(other); wait <= 4900*time.Millisecond || wait > 5*time.Second {
		t.Errorf("a change right after the engagement waits %s, want about 5s", wait)
	}
	if wait := mc.m.reengageWait(mc.m.hash); wait != 0 {
		t.Errorf("the unchanged registration waits %s", wait)
	}
	mc.m.since = time.Now().Add(-5 * time.Second)
	if wait := mc.m.reengageWait(other); wait > 0 {
		t.Errorf("a change 5s after the engagement waits %s more", wait)
	}
}

// A registration whose kubeconfig changes re-engages the member afresh: the
// old connection stops, a new one is engaged, and the hub is told the
// engagement replaces another. One whose only change is the bearer token
// keeps its connection and caches, swapping the token in place.
func TestChangedKubeconfigReengagesAndANewTokenIsSwappedInPlace(t *testing.T) {
	mc := newMachine(t, nil)
	mc.sync(config("t1"), 0)
	first := mc.last()

	obs := mc.sync(config("t2"), 0)
	wantObs(t, obs, true, v1alpha1.MemberEngagedReason)
	if len(mc.conns) != 1 || len(first.tokens) != 1 || first.tokens[0] != "t2" || first.stopped {
		t.Errorf("a new token made %d connections, set tokens %v, stopped the first %v; want the token swapped in place", len(mc.conns), first.tokens, first.stopped)
	}
	if !strings.Contains(obs.message, "token replaced") || obs.widgets != unknownWidgets {
		t.Errorf("swap said %q with %d Widgets", obs.message, obs.widgets)
	}

	moved := config("t2")
	moved.REST.Host = "https://elsewhere:6443"
	obs = mc.sync(moved, 0)
	wantObs(t, obs, true, v1alpha1.MemberEngagedReason)
	if len(mc.conns) != 2 || !first.stopped || len(mc.engaged) != 2 {
		t.Errorf("a moved server made %d connections, stopped the first %v, engaged %d; want a fresh engagement", len(mc.conns), first.stopped, len(mc.engaged))
	}
	if len(mc.announced) != 2 || !mc.announced[1] {
		t.Errorf("announced %v, want the second to replace an engagement", mc.announced)
	}
}

// A registration whose config cannot be built stops the member and fails
// for good (until it changes), with the refusal's reason.
func TestUnusableRegistrationStopsTheMember(t *testing.T) {
	mc := newMachine(t, nil)
	mc.sync(config("t1"), 0)
	c := mc.last()
	obs := mc.m.sync(t.Context(), t.Context(), change{hash: sha256.Sum256([]byte("broken")),
		config: func() (*connect.Config, error) {
			return nil, fmt.Errorf("%w: tokenFile", connect.ErrUnsafeKubeconfig)
		},
		announce: func(bool) *v1alpha1.MemberCluster {
			t.Error("announced an engagement of an unusable registration")
			return nil
		}})
	wantObs(t, obs, false, v1alpha1.MemberUnsafeKubeconfigReason)
	if !errors.Is(obs.err, reconcile.TerminalError(nil)) || !c.stopped {
		t.Errorf("error %v (want terminal), connection stopped %v", obs.err, c.stopped)
	}
	mc.wantState(idle)
}

// An engagement that finds no Widget API looks again after 10 seconds
// without an error; one whose caches pass the bound on objects after a
// minute; any other failure is an error, retried with backoff.
func TestFailedEngagementsRetryAsDocumented(t *testing.T) {
	for _, tc := range []struct {
		name      string
		preflight error
		sync      error
		reason    string
		after     time.Duration
		err       bool
	}{
		{"no CRD", fmt.Errorf("%w: Widget", clusters.ErrKindMissing), nil, v1alpha1.MemberWidgetCRDMissingReason, 10 * time.Second, false},
		{"too many objects", nil, fmt.Errorf("%w: 50001", clusters.ErrTooManyObjects), v1alpha1.MemberTooManyObjectsReason, time.Minute, false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "widgets"}, "", errors.New("no")), nil, v1alpha1.MemberForbiddenReason, 0, true},
		{"unreachable", errors.New("connection refused"), nil, v1alpha1.MemberUnreachableReason, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := newMachine(t, nil)
			mc.next = func(f *fakeConn) { f.preflight, f.sync = tc.preflight, tc.sync }
			obs := mc.sync(config("t1"), 0)
			wantObs(t, obs, false, tc.reason)
			if obs.result.RequeueAfter != tc.after || (obs.err != nil) != tc.err {
				t.Errorf("next look after %s, error %v; want %s, error %v", obs.result.RequeueAfter, obs.err, tc.after, tc.err)
			}
			mc.wantState(idle)
			if !mc.last().stopped || len(mc.engaged) != 0 {
				t.Errorf("failed connection stopped %v, engaged %d times", mc.last().stopped, len(mc.engaged))
			}
		})
	}
}

// An engaged member whose caches passed the bound on objects is parked at
// its next probe, with reason TooManyObjects.
func TestOverfullMemberIsParked(t *testing.T) {
	mc := newMachine(t, func(o *Options) { o.MaxObjects = 10 })
	cfg := config("t1")
	mc.sync(cfg, 0)
	mc.last().set(func(f *fakeConn) { f.tooMany = fmt.Errorf("%w: 11 objects", clusters.ErrTooManyObjects) })
	obs := mc.sync(cfg, 0) // even right after a probe
	wantObs(t, obs, false, v1alpha1.MemberTooManyObjectsReason)
	mc.wantState(parked)
}

// A member served in a new term (its replica's heartbeat lapsed and came
// back) is drained, so that every request of the old term is answered
// before any of the new one is sent, and engaged afresh.
func TestNewTermDrainsAndReengages(t *testing.T) {
	mc := newMachine(t, nil)
	cfg := config("t1")
	mc.sync(cfg, 1)
	old := mc.last()
	wantObs(t, mc.sync(cfg, 2), true, v1alpha1.MemberEngagedReason)
	if !old.drained || len(mc.conns) != 2 || mc.m.term != 2 {
		t.Errorf("old term drained %v; %d connections; term %d", old.drained, len(mc.conns), mc.m.term)
	}
}

// A member that stops being served here stops at once, or drained; an
// engagement still under way when it goes ends stopped, never engaged.
func TestMemberThatLeavesEngagesNothingMore(t *testing.T) {
	mc := newMachine(t, nil)
	mc.sync(config("t1"), 0)
	c := mc.last()
	mc.m.leave(t.Context(), time.Second, "handed over")
	if !c.drained || mc.m.cluster() != nil {
		t.Errorf("drained %v, still served %v", c.drained, mc.m.cluster() != nil)
	}
	obs := mc.m.engage(t.Context(), engagement{cfg: config("t1")})
	if late := mc.last(); !late.stopped || mc.m.cluster() != nil {
		t.Errorf("an engagement after leaving: stopped %v, served %v (observed %s)", late.stopped, mc.m.cluster() != nil, obs.reason)
	}
}

// token is a ServiceAccount token bound to the Secret bound, issued at iat
// for lifetime, as the TokenRequest API makes them (unsigned: the hub reads
// claims, it never verifies them).
func token(t *testing.T, iat time.Time, lifetime time.Duration, bound string) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"iat": iat.Unix(), "exp": iat.Add(lifetime).Unix(),
		"kubernetes.io": map[string]any{"namespace": "widgethub-system", "serviceaccount": map[string]any{"name": "widgethub-member"},
			"secret": map[string]any{"name": bound, "uid": "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + ".sig"
}

// tokenStore is a TokenWriter that keeps what it is given.
type tokenStore struct {
	writes, dryRuns int
	fail            error
}

func (s *tokenStore) WriteToken(_ context.Context, _ *Registration, token string, _ TokenIssue, dryRun bool) ([sha256.Size]byte, error) {
	if s.fail != nil {
		return [sha256.Size]byte{}, s.fail
	}
	if dryRun {
		s.dryRuns++
	} else {
		s.writes++
	}
	return sha256.Sum256([]byte(token)), nil
}

// A renewable token is renewed once half of its lifetime has passed, with
// a dry run of the write first; a failed renewal is retried after 10s,
// 20s, 40s ... up to 5 minutes, with one Warning Event for the run of
// failures, and the member stays engaged meanwhile.
func TestRenewalIsDueAtHalfLifeAndBacksOff(t *testing.T) {
	mc := newMachine(t, nil)
	lifetime := 24 * time.Hour
	tok := token(t, time.Now().Add(-lifetime/2+time.Minute), lifetime, "bound")
	cfg := config(tok)
	mc.sync(cfg, 0)
	reg := &Registration{Hash: mc.m.hash, Renewal: &TokenRenewal{BoundSecret: "bound"}}
	store := &tokenStore{}
	obs := observation{}
	mc.m.renew(t.Context(), t.Context(), reg, store, &obs)
	conn := mc.last()
	if conn.renewed != 0 || !obs.renewal.renewable || obs.result.RequeueAfter <= 0 || obs.result.RequeueAfter > time.Minute {
		t.Fatalf("a minute before half-life: %d renewals, renewable %v, next look after %s; want none, yes, within a minute",
			conn.renewed, obs.renewal.renewable, obs.result.RequeueAfter)
	}

	tok = token(t, time.Now().Add(-lifetime/2-time.Minute), lifetime, "bound")
	mc = newMachine(t, nil)
	mc.sync(config(tok), 0)
	conn = mc.last()
	conn.set(func(f *fakeConn) {
		f.renewFailures = apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "", errors.New("no"))
	})
	reg.Hash = mc.m.hash
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		mc.m.renewal.next = time.Time{} // the backoff has passed
		obs = observation{}
		mc.m.renew(t.Context(), t.Context(), reg, store, &obs)
		if obs.result.RequeueAfter != want || obs.renewal.failure == "" {
			t.Errorf("failure %d: retry after %s (failure %q), want %s", i+1, obs.result.RequeueAfter, obs.renewal.failure, want)
		}
	}
	mc.m.renewal.failures = 20
	mc.m.renewal.next = time.Time{}
	obs = observation{}
	mc.m.renew(t.Context(), t.Context(), reg, store, &obs)
	if obs.result.RequeueAfter != 5*time.Minute {
		t.Errorf("after many failures: retry after %s, want the 5m cap", obs.result.RequeueAfter)
	}
	if warnings := len(mc.recorder.Events); warnings != 1 {
		t.Errorf("%d Events for one run of failures, want 1", warnings)
	}
	mc.wantState(engaged)

	conn.set(func(f *fakeConn) { f.renewFailures, f.renewAnswer = nil, "renewed-token" })
	mc.m.renewal = renewal{}
	store.writes, store.dryRuns = 0, 0
	obs = observation{}
	mc.m.renew(t.Context(), t.Context(), reg, store, &obs)
	if store.dryRuns != 1 || store.writes != 1 || obs.renewal.failure != "" {
		t.Errorf("a renewal that succeeds: %d dry runs, %d writes, failure %q; want 1, 1, none", store.dryRuns, store.writes, obs.renewal.failure)
	}
}
