package members

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/providers/sharding"
)

const (
	// DefaultSyncTimeout bounds how long a member's informers may take to sync.
	DefaultSyncTimeout = 30 * time.Second
	// DefaultMissingKindRetry is how often a member without a watched kind is tried again.
	DefaultMissingKindRetry = 10 * time.Second
	// DefaultConcurrentEngagements is how many registrations are processed at once.
	DefaultConcurrentEngagements = 16
	// DefaultProbeInterval, DefaultProbeTimeout and DefaultFailureThreshold make a
	// dead member Unreachable within about 20s and a returning one Ready within 5s.
	DefaultProbeInterval    = 5 * time.Second
	DefaultProbeTimeout     = 3 * time.Second
	DefaultFailureThreshold = 3
	// DefaultProbeRefresh is how stale status.lastProbeTime may get before
	// it is rewritten although nothing else changed: probes run far more
	// often than that, and a write per probe would load the hub for no news.
	DefaultProbeRefresh = time.Minute
	// DefaultRetryDelay and DefaultMaxRetryDelay bound the backoff between
	// engagement attempts: the first retry after half a second, doubling up
	// to a minute.
	DefaultRetryDelay    = 500 * time.Millisecond
	DefaultMaxRetryDelay = time.Minute
	// DefaultMinReengageInterval bounds how often a changing registration
	// re-engages its member (each engagement lists the member's objects).
	DefaultMinReengageInterval = 5 * time.Second
	// DefaultDrainTimeout bounds the wait for a handed-over member's
	// requests in flight: a little more than a member request's own bound.
	DefaultDrainTimeout = connect.DefaultRequestTimeout + 5*time.Second
)

var (
	_ multicluster.Provider         = (*Provider)(nil)
	_ multicluster.ProviderRunnable = (*Provider)(nil)
)

// Options configure a Provider.
type Options struct {
	// Namespace is the registration namespace: it holds the sharding
	// Leases. Defaults to the registration contract's DefaultNamespace.
	Namespace string
	// Scheme of the member clusters and of the hub's registering objects. Required.
	Scheme *runtime.Scheme
	// SyncTimeout bounds a member's cache sync. Defaults to DefaultSyncTimeout.
	SyncTimeout time.Duration
	// MissingKindRetry is the wait before trying a member again that does
	// not serve a watched kind. Defaults to DefaultMissingKindRetry.
	MissingKindRetry time.Duration
	// WatchedObjects are the kinds whose informers must sync before a member
	// is engaged (the kinds the member controllers watch).
	WatchedObjects []client.Object
	// CacheByObject narrows what each member's cache holds per kind.
	CacheByObject map[client.Object]cache.ByObject
	// CacheTransform trims every object a member's cache holds.
	CacheTransform toolscache.TransformFunc
	// MaxObjects, when positive, bounds the objects of one member's caches:
	// past it the member is parked with reason TooManyObjects.
	MaxObjects int
	// ConcurrentEngagements is how many registrations of a source are reconciled at once.
	// Defaults to DefaultConcurrentEngagements.
	ConcurrentEngagements int
	// ProbeInterval is the time between health probes of an engaged member.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one health probe.
	ProbeTimeout time.Duration
	// FailureThreshold is how many probes in a row must fail before a member is Unreachable.
	FailureThreshold int
	// ProbeRefresh is how stale status.lastProbeTime may get before it is
	// rewritten with nothing else changed, less how late the member's probes
	// come (up to one interval); a probe is brought forward to then.
	// Defaults to DefaultProbeRefresh.
	ProbeRefresh time.Duration
	// RetryDelay and MaxRetryDelay bound the backoff between attempts to
	// engage a failing member. Default DefaultRetryDelay, DefaultMaxRetryDelay.
	RetryDelay, MaxRetryDelay time.Duration
	// MinReengageInterval is the least time between two engagements of one
	// member because its registration changed: a Secret rewritten many
	// times a second re-engages at most this often, with its latest version.
	MinReengageInterval time.Duration
	// Sharding, when set, shares the members among the hub's replicas: this
	// provider engages only the members this replica owns, each under its
	// fence, and hands the others over. Nil: it engages every member.
	// Its Namespace defaults to the registration namespace.
	Sharding *sharding.Options
	// DrainTimeout bounds how long a member handed to another replica may
	// take to answer its requests in flight. Defaults to DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Renewal configures the renewal of the tokens join mints (renew.go).
	Renewal RenewalOptions
}

func (o *Options) defaults() {
	orDefault(&o.Namespace, registration.DefaultNamespace)
	orDefault(&o.SyncTimeout, DefaultSyncTimeout)
	orDefault(&o.MissingKindRetry, DefaultMissingKindRetry)
	orDefault(&o.ConcurrentEngagements, DefaultConcurrentEngagements)
	orDefault(&o.ProbeInterval, DefaultProbeInterval)
	orDefault(&o.ProbeTimeout, DefaultProbeTimeout)
	orDefault(&o.FailureThreshold, DefaultFailureThreshold)
	orDefault(&o.ProbeRefresh, DefaultProbeRefresh)
	orDefault(&o.RetryDelay, DefaultRetryDelay)
	orDefault(&o.MaxRetryDelay, DefaultMaxRetryDelay)
	orDefault(&o.MinReengageInterval, DefaultMinReengageInterval)
	orDefault(&o.DrainTimeout, DefaultDrainTimeout)
	o.Renewal.defaults()
}

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// The hub writes the MemberClusters and Events in its registration namespace.
// +kubebuilder:rbac:groups=widgethub.io,namespace=widgethub-system,resources=memberclusters,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=widgethub.io,namespace=widgethub-system,resources=memberclusters/status,verbs=get;update;patch

// Provider engages one member cluster per registration, whichever source
// registers it, on the replicas its ownership says.
type Provider struct {
	opts Options
	hub  client.Client
	// apiReader reads from the hub's API server, bypassing the cache.
	apiReader client.Reader
	log       logr.Logger
	recorder  events.EventRecorder

	// started is closed once the provider runs and may serve.
	started chan struct{}
	env     *memberEnv
	// sources are the registration sources, first the one that keeps a
	// name two of them claim.
	sources   []*sourceController
	registry  *registry
	ownership ownership

	indexMu  sync.Mutex
	indexers []index
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// New returns a Provider; Register its sources before starting the manager.
func New(opts Options) *Provider {
	opts.defaults()
	p := &Provider{opts: opts, started: make(chan struct{}), registry: newRegistry()}
	p.env = &memberEnv{opts: &p.opts, connect: p.connect, index: p.index,
		gate: func(term uint64) func() error { return p.ownership.gate(term) }}
	return p
}

// Register adds src's controller to the hub manager: each object of src
// registers the member named after it. Sources registered earlier keep a
// member name that a later one claims too.
func (p *Provider) Register(mgr mcmanager.Manager, src Source) error {
	if p.opts.Scheme == nil {
		return errors.New("members provider: Options.Scheme is required")
	}
	local := mgr.GetLocalManager()
	if p.hub == nil {
		if err := p.setUp(local); err != nil {
			return err
		}
	}
	sc := &sourceController{Source: src, provider: p, index: len(p.sources),
		log:     p.log.WithValues("source", src.Kind()),
		workers: &registrationWorkers{workers: p.opts.ConcurrentEngagements}}
	p.sources = append(p.sources, sc)
	return ctrl.NewControllerManagedBy(local).
		Named(src.ControllerName()).
		For(src.Object()).
		// A registration that goes stops its engagement in flight at once.
		Watches(src.Object(), sc.workers.cutGone()).
		// Our own status writes need no reconcile; a deleted MemberCluster does.
		Owns(&v1alpha1.MemberCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{
			// The shared fair queue, each registration its own member, so
			// that registrations that hang hold a bounded share of the
			// workers (see "Workers" in the package documentation). Not
			// controller-runtime v0.24.1's priority queue, which can
			// deadlock on shutdown (controller-runtime#3538, fixed after
			// v0.24): a worker's Done waits for the lock that a hand-off to
			// a worker that already left holds forever. The fair queue's
			// ShutDown only wakes its Gets, and Done takes its one lock.
			UsePriorityQueue:        ptr.To(false),
			NewQueue:                sc.workers.newQueue,
			MaxConcurrentReconciles: p.opts.ConcurrentEngagements,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](p.opts.RetryDelay, p.opts.MaxRetryDelay),
		}).
		Complete(sc)
}

// setUp takes the hub's clients from its manager and chooses the ownership:
// everything, or a share through Leases with Options.Sharding.
func (p *Provider) setUp(local ctrl.Manager) error {
	p.hub = local.GetClient()
	p.apiReader = local.GetAPIReader()
	p.log = local.GetLogger().WithName("members")
	p.recorder = clusters.PrintableRecorder(local.GetEventRecorder("widgethub"))
	p.env.recorder = p.recorder
	if p.opts.Sharding == nil {
		p.ownership = everything{}
		return nil
	}
	opts := *p.opts.Sharding
	orDefault(&opts.Namespace, p.opts.Namespace)
	shards, err := sharding.New(opts, local.GetCache(), p.apiReader, p.hub, p.log)
	if err != nil {
		return err
	}
	p.ownership = &sharded{shards: shards, leases: local.GetCache(), scheme: p.hub.Scheme(), list: p.listRegistrations,
		live: shards.Live, drain: p.opts.DrainTimeout, log: p.log}
	p.registry.served = p.ownership.served
	return nil
}

// CacheOptions extends a hub cache's options with what the engine reads
// from the hub besides the registrations: the Leases of sharding in
// namespace, the registration namespace.
func CacheOptions(opts cache.Options, namespace string) cache.Options {
	return CacheObjects(opts, namespace, &coordinationv1.Lease{}, cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}}, Label: sharding.LeaseSelector()})
}

// CacheObjects extends a hub cache's options with the objects of obj's
// kind in namespace, narrowed as by says: a source's registrations.
func CacheObjects(opts cache.Options, namespace string, obj client.Object, by cache.ByObject) cache.Options {
	if opts.DefaultNamespaces == nil {
		opts.DefaultNamespaces = map[string]cache.Config{}
	}
	opts.DefaultNamespaces[namespace] = cache.Config{}
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[obj] = by
	return opts
}

// connect makes a member's connection with clusters.New: with the caches
// the options describe, or without any, for a prober.
func (p *Provider) connect(name string, cfg *connect.Config, gate func() error, caches bool, log logr.Logger) (connection, error) {
	opts := clusters.MemberOptions{Scheme: p.opts.Scheme, Logger: log, Gate: gate}
	if caches {
		opts.CacheByObject, opts.Transform, opts.MaxObjects = p.opts.CacheByObject, p.opts.CacheTransform, p.opts.MaxObjects
	}
	return clusters.New(name, cfg, opts)
}

// Start records the context that member lifetimes derive from and the Aware
// to engage them with, takes part in the hub as its ownership says, then
// blocks until ctx ends and lets every member go: stopped at once, or
// drained and handed over on a sharded hub.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	if p.ownership == nil {
		return errors.New("members provider: no source registered")
	}
	p.env.runCtx, p.env.aware = ctx, aware
	// widgethub_registrations is served while the provider runs.
	registrations.track(p)
	defer registrations.untrack(p)
	if err := p.ownership.start(ctx, p.wake); err != nil {
		return err
	}
	close(p.started)
	<-ctx.Done()

	members := p.registry.close()
	stopCtx := context.WithoutCancel(ctx)
	drain := p.ownership.drainTimeout()
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			m.leave(stopCtx, drain, "the hub replica stops")
			forgetMetrics(string(m.name))
		})
	}
	wg.Wait()
	p.ownership.stop(stopCtx)
	p.log.Info("Let every member go", "members", len(members))
	return nil
}

// wake reconciles the registrations that hold the named members, or all of
// them: those whose MemberCluster was last Ready first. The queue hands
// workers out in the order registrations arrive, so when this replica takes
// over a dead one's members, the ones that answered there are engaged
// before those that hung there, each of which holds a worker until it is
// cut short.
func (p *Provider) wake(names ...string) {
	var rest []claim
	for _, c := range p.registry.holders(names...) {
		mc := &v1alpha1.MemberCluster{}
		if p.hub.Get(context.Background(), c.key, mc) == nil && meta.IsStatusConditionTrue(mc.Status.Conditions, v1alpha1.MemberReady) {
			c.source.wakeUp(c.key)
		} else {
			rest = append(rest, c)
		}
	}
	for _, c := range rest {
		c.source.wakeUp(c.key)
	}
}

// listRegistrations lists the registrations of every source, each member
// name once: the registration of the earliest source, which keeps it.
func (p *Provider) listRegistrations(ctx context.Context) ([]Registration, error) {
	seen := map[string]bool{}
	var all []Registration
	for _, sc := range p.sources {
		list, err := sc.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the %s registrations: %w", sc.Kind(), err)
		}
		for _, r := range list {
			if name := r.Owner.GetName(); !seen[name] {
				seen[name] = true
				all = append(all, r)
			}
		}
	}
	return all, nil
}

// Get returns the engaged member called name, or multicluster.ErrClusterNotFound.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	if m := p.registry.member(name); m != nil {
		if conn := m.cluster(); conn != nil {
			return conn, nil
		}
	}
	return nil, fmt.Errorf("member %q: %w", name, multicluster.ErrClusterNotFound)
}

// IndexField indexes a field on every engaged member and on those engaged later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.indexMu.Lock()
	defer p.indexMu.Unlock()
	p.indexers = append(p.indexers, index{obj: obj, field: field, extract: extract})
	var errs []error
	for _, m := range p.registry.each() {
		if conn := m.cluster(); conn != nil {
			if err := conn.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
				errs = append(errs, fmt.Errorf("index %s on member %q: %w", field, m.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// index applies every field indexer to conn, then runs commit, with no
// indexer added meanwhile.
func (p *Provider) index(conn connection, commit func()) error {
	p.indexMu.Lock()
	defer p.indexMu.Unlock()
	for _, idx := range p.indexers {
		if err := conn.GetFieldIndexer().IndexField(conn.Context(), idx.obj, idx.field, idx.extract); err != nil {
			return fmt.Errorf("index %s: %w", idx.field, err)
		}
	}
	commit()
	return nil
}

// RecordOutcome records how a reconcile of the Widget key of the member
// called cluster ended: counted in widgethub_member_reconciles_total and
// widgethub_member_reconcile_errors_total, and remembered for the member's
// Degraded verdict at its next probe. Outcomes of members this replica does
// not serve are dropped. It is the Widget controller's
// controller.OutcomeRecorder.
func (p *Provider) RecordOutcome(cluster multicluster.ClusterName, key types.NamespacedName, err error) {
	m := p.registry.member(cluster)
	if m == nil {
		return
	}
	memberReconciles.WithLabelValues(string(cluster)).Inc()
	if err != nil {
		memberReconcileErrors.WithLabelValues(string(cluster)).Inc()
	}
	m.failing.record(key, err != nil)
}
