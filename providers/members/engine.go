package members

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	contract "github.com/widgethub/widgethub/api/registration" // named: the engine has a type registration
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
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
	// DefaultMaxRetryDelay caps the backoff between engagement attempts.
	DefaultMaxRetryDelay = time.Minute
	// DefaultMinReengageInterval bounds how often a changing kubeconfig
	// re-engages its member (each engagement lists the member's objects).
	DefaultMinReengageInterval = 5 * time.Second
	// DefaultDrainTimeout bounds the wait for a handed-over member's
	// requests in flight: a little more than a member request's own bound.
	DefaultDrainTimeout = clusters.DefaultRequestTimeout + 5*time.Second
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
	// Scheme of the member clusters. Required.
	Scheme *runtime.Scheme
	// Config turns a kubeconfig into a member's rest.Config.
	Config clusters.ConfigOptions
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
	// MaxRetryDelay caps the backoff between attempts to engage a failing member.
	MaxRetryDelay time.Duration
	// MinReengageInterval is the least time between two engagements of one
	// member because its registration changed: a Secret rewritten many
	// times a second re-engages at most this often, with its latest version.
	MinReengageInterval time.Duration
	// Sharding, when set, shares the members among the hub's replicas: this
	// provider engages only the members this replica owns, each under its
	// fence, and hands the others over. Nil: it engages every member.
	// Its Namespace defaults to the registration namespace. A sharded
	// Provider takes one source only (see Register).
	Sharding *sharding.Options
	// DrainTimeout bounds how long a member handed to another replica may
	// take to answer its requests in flight. Defaults to DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Renewal configures the renewal of the tokens join mints (renew.go).
	Renewal RenewalOptions
}

func (o *Options) defaults() {
	orDefault(&o.Namespace, contract.DefaultNamespace)
	orDefault(&o.SyncTimeout, DefaultSyncTimeout)
	orDefault(&o.MissingKindRetry, DefaultMissingKindRetry)
	orDefault(&o.ConcurrentEngagements, DefaultConcurrentEngagements)
	orDefault(&o.ProbeInterval, DefaultProbeInterval)
	orDefault(&o.ProbeTimeout, DefaultProbeTimeout)
	orDefault(&o.FailureThreshold, DefaultFailureThreshold)
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
// registers it.
type Provider struct {
	opts Options
	hub  client.Client
	// apiReader reads from the hub's API server, bypassing the cache.
	apiReader client.Reader
	log       logr.Logger
	recorder  events.EventRecorder

	started chan struct{}
	runCtx  context.Context
	aware   multicluster.Aware

	mu      sync.RWMutex
	members map[multicluster.ClusterName]*registration
	// parked are the registered members that failed FailureThreshold
	// probes in a row: their caches are stopped, their connections closed,
	// and they are probed until they answer, then engaged afresh.
	parked   map[multicluster.ClusterName]*parking
	indexers []index
	// closing is set when a sharded provider hands its members over on
	// shutdown: nothing is engaged any more.
	closing bool
	// sources are the registration sources, first the one that keeps a
	// name two of them claim; claims says which registration holds each
	// member name, losers which one claims it too and waits.
	sources []*sourceController
	claims  map[multicluster.ClusterName]claim
	losers  map[multicluster.ClusterName]claim
	// shards is this replica's share of a sharded hub; nil without sharding.
	shards *sharding.Shards
	// leaseEvents asks the sharding heartbeat for an early look at the Leases.
	leaseEvents chan struct{}
	// assigned is the last assignment of members to replicas; moved
	// receives the registrations whose member a new one moved.
	assignMu sync.Mutex
	assigned *assignment
	moved    chan event.TypedGenericEvent[reconcile.Request]
}

// registration is an engaged member and what its probes have seen.
type registration struct {
	engagement
	member    *clusters.Member
	failures  int
	lastError string
	// probedAt is when the member was last probed, and probed what it showed.
	probedAt time.Time
	probed   observation
	// renewal is how the renewals of its token went (renew.go).
	renewal renewal
}

// parking is a registered member that is not engaged until it answers again.
type parking struct {
	engagement
	// prober is a member that is never started: it only runs probes.
	prober *clusters.Member
}

// engagement is what a member was engaged with, kept while it is parked.
type engagement struct {
	// hash is the registration's Registration.Hash it was engaged with,
	// cfg the config built from it.
	hash [sha256.Size]byte
	cfg  *clusters.Config
	// since is when the engagement began; version the member's last known version.
	since   time.Time
	version string
	// term is the sharding term the member's fence is held in; zero
	// without sharding.
	term uint64
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// New returns a Provider; call SetupWithManager before starting the manager.
func New(opts Options) *Provider {
	opts.defaults()
	return &Provider{
		opts:    opts,
		started: make(chan struct{}),
		members: map[multicluster.ClusterName]*registration{},
		parked:  map[multicluster.ClusterName]*parking{},
		claims:  map[multicluster.ClusterName]claim{},
		losers:  map[multicluster.ClusterName]claim{},
	}
}

// Register adds src's controller to the hub manager: each object of src
// registers the member named after it. Sources registered earlier keep a
// member name that a later one claims too. A sharded Provider takes one
// source only: the assignment of members to replicas is computed over it.
func (p *Provider) Register(mgr mcmanager.Manager, src Source) error {
	if p.opts.Scheme == nil {
		return errors.New("members provider: Options.Scheme is required")
	}
	if p.opts.Sharding != nil && len(p.sources) > 0 {
		return fmt.Errorf("register the %s source: a sharded hub takes registrations from one source only", src.Kind())
	}
	local := mgr.GetLocalManager()
	if p.hub == nil {
		p.hub = local.GetClient()
		p.apiReader = local.GetAPIReader()
		p.log = local.GetLogger().WithName("members")
		p.recorder = clusters.PrintableRecorder(local.GetEventRecorder("widgethub"))
	}
	sc := &sourceController{Source: src, provider: p, index: len(p.sources),
		log:     p.log.WithValues("source", src.Kind()),
		workers: &registrationWorkers{workers: p.opts.ConcurrentEngagements},
		wake:    make(chan event.TypedGenericEvent[reconcile.Request], 64)}
	p.sources = append(p.sources, sc)
	b := ctrl.NewControllerManagedBy(local).
		Named(src.ControllerName()).
		For(src.Object()).
		// Our own status writes need no reconcile; a deleted MemberCluster does.
		Owns(&v1alpha1.MemberCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A registration that waits for a member name another holds is
		// woken when that one goes.
		WatchesRawSource(source.TypedChannel(sc.wake, enqueueRequest())).
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
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](500*time.Millisecond, p.opts.MaxRetryDelay),
		})
	if p.opts.Sharding != nil {
		opts := *p.opts.Sharding
		orDefault(&opts.Namespace, p.opts.Namespace)
		shards, err := sharding.New(opts, local.GetCache(), local.GetAPIReader(), p.hub, p.log)
		if err != nil {
			return err
		}
		p.shards = shards
		p.leaseEvents = make(chan struct{}, 1)
		p.moved = make(chan event.TypedGenericEvent[reconcile.Request], 64)
		// A fence released or taken wakes its registration; a change of
		// the live replicas wakes every registration, and a new assignment
		// those whose member it moved.
		b = b.Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(p.leaseChanged)).
			WatchesRawSource(source.Channel(p.shards.Changes(), handler.EnqueueRequestsFromMapFunc(p.allRegistrations))).
			WatchesRawSource(source.TypedChannel(p.moved, enqueueRequest()))
	}
	return b.Complete(sc)
}

// enqueueRequest is the handler of channels that carry reconcile requests.
func enqueueRequest() handler.TypedEventHandler[reconcile.Request, reconcile.Request] {
	return handler.TypedFuncs[reconcile.Request, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[reconcile.Request], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(e.Object)
		}}
}

// Start records the context that member lifetimes derive from and the Aware
// to engage them with, then blocks until ctx ends and stops every member.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.runCtx, p.aware = ctx, aware
	// widgethub_registrations is served while the provider runs.
	registrations.track(p)
	defer registrations.untrack(p)
	if p.shards != nil {
		return p.startSharded(ctx)
	}
	close(p.started)
	<-ctx.Done()

	regs, parked := p.takeAll()
	for name, r := range regs {
		r.member.Stop()
		clusters.ForgetMetrics(string(name))
	}
	for name, pk := range parked {
		pk.prober.Stop()
		clusters.ForgetMetrics(string(name))
	}
	return nil
}

// Get returns the engaged member called name, or multicluster.ErrClusterNotFound.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if r, ok := p.members[name]; ok {
		return r.member, nil
	}
	return nil, fmt.Errorf("member %q: %w", name, multicluster.ErrClusterNotFound)
}

// IndexField indexes a field on every engaged member and on those engaged later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	p.indexers = append(p.indexers, index{obj: obj, field: field, extract: extract})
	regs := make(map[multicluster.ClusterName]*registration, len(p.members))
	for n, r := range p.members {
		regs[n] = r
	}
	p.mu.Unlock()
	var errs []error
	for name, r := range regs {
		if err := r.member.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			errs = append(errs, fmt.Errorf("index %s on member %q: %w", field, name, err))
		}
	}
	return errors.Join(errs...)
}
