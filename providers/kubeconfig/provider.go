package kubeconfig

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/clusters"
)

const (
	// SecretLabel marks a Secret as a member registration when set to "true".
	SecretLabel = "widgethub.io/kubeconfig"
	// SecretKey is the Secret data key that holds the kubeconfig.
	SecretKey = "kubeconfig"
	// DefaultNamespace is the default registration namespace.
	DefaultNamespace = "widgethub-system"

	// DefaultSyncTimeout bounds how long a member's informers may take to sync.
	DefaultSyncTimeout = 30 * time.Second
	// DefaultMissingKindRetry is how often a member without a watched kind is tried again.
	DefaultMissingKindRetry = 15 * time.Second
	// DefaultConcurrentEngagements is how many registrations are processed at once.
	DefaultConcurrentEngagements = 16
)

var (
	_ multicluster.Provider         = (*Provider)(nil)
	_ multicluster.ProviderRunnable = (*Provider)(nil)
)

// Options configure a Provider.
type Options struct {
	// Namespace holds the registration Secrets. Defaults to DefaultNamespace.
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
	// ConcurrentEngagements is how many Secrets are reconciled at once.
	// Defaults to DefaultConcurrentEngagements.
	ConcurrentEngagements int
}

func (o *Options) defaults() {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = DefaultSyncTimeout
	}
	if o.MissingKindRetry == 0 {
		o.MissingKindRetry = DefaultMissingKindRetry
	}
	if o.ConcurrentEngagements == 0 {
		o.ConcurrentEngagements = DefaultConcurrentEngagements
	}
}

// SecretCacheOptions scopes a hub cache to the registration Secrets of
// namespace: the hub reads no other Secret.
func SecretCacheOptions(namespace string) cache.Options {
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{SecretLabel: "true"})},
		},
	}
}

// The hub reads registration Secrets in its registration namespace only.
// +kubebuilder:rbac:groups="",namespace=widgethub-system,resources=secrets,verbs=get;list;watch

// Provider engages one member cluster per registration Secret.
type Provider struct {
	opts Options
	hub  client.Client
	log  logr.Logger

	started chan struct{}
	runCtx  context.Context
	aware   multicluster.Aware

	mu       sync.RWMutex
	members  map[multicluster.ClusterName]*registration
	indexers []index
}

type registration struct {
	member *clusters.Member
	hash   [sha256.Size]byte
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
	}
}

// SetupWithManager registers the Secret controller with the hub manager.
func (p *Provider) SetupWithManager(mgr mcmanager.Manager) error {
	if p.opts.Scheme == nil {
		return errors.New("kubeconfig provider: Options.Scheme is required")
	}
	local := mgr.GetLocalManager()
	p.hub = local.GetClient()
	p.log = local.GetLogger().WithName("kubeconfig-provider")
	return ctrl.NewControllerManagedBy(local).
		Named("kubeconfig-provider").
		For(&corev1.Secret{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: p.opts.ConcurrentEngagements}).
		Complete(p)
}

// Start records the context that member lifetimes derive from and the Aware
// to engage them with, then blocks until ctx ends and stops every member.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.runCtx, p.aware = ctx, aware
	close(p.started)
	<-ctx.Done()

	p.mu.Lock()
	regs := p.members
	p.members = map[multicluster.ClusterName]*registration{}
	p.mu.Unlock()
	for _, r := range regs {
		r.member.Stop()
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

// ClusterNames lists the engaged members.
func (p *Provider) ClusterNames() []multicluster.ClusterName {
	p.mu.RLock()
	defer p.mu.RUnlock()
	names := make([]multicluster.ClusterName, 0, len(p.members))
	for n := range p.members {
		names = append(names, n)
	}
	return names
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

// Reconcile engages, re-engages or disengages the member of one Secret.
func (p *Provider) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	name := multicluster.ClusterName(req.Name)
	log := p.log.WithValues("cluster", name, "secret", req.NamespacedName)
	select {
	case <-p.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}

	secret := &corev1.Secret{}
	if err := p.hub.Get(ctx, req.NamespacedName, secret); err != nil {
		if apierrors.IsNotFound(err) {
			p.disengage(name, log, "registration Secret is gone")
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get registration Secret %s: %w", req.NamespacedName, err)
	}
	if !secret.DeletionTimestamp.IsZero() {
		p.disengage(name, log, "registration Secret is being deleted")
		return reconcile.Result{}, nil
	}
	data := secret.Data[SecretKey]
	if len(data) == 0 {
		p.disengage(name, log, "registration Secret has no kubeconfig")
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("secret %s has no %q data key", req.NamespacedName, SecretKey))
	}

	hash := sha256.Sum256(data)
	p.mu.RLock()
	current, engaged := p.members[name]
	p.mu.RUnlock()
	if engaged && current.hash == hash {
		return reconcile.Result{}, nil
	}

	cfg, err := clusters.RESTConfig(data, p.opts.Config)
	if err != nil {
		p.disengage(name, log, "kubeconfig is not usable")
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("secret %s: %w", req.NamespacedName, err))
	}
	if engaged {
		p.disengage(name, log, "kubeconfig changed")
	}
	return p.engage(name, cfg, hash, log)
}

func (p *Provider) engage(name multicluster.ClusterName, cfg *clusters.Config, hash [sha256.Size]byte, log logr.Logger) (reconcile.Result, error) {
	if cfg.Contexts > 1 {
		log.Info("Kubeconfig has several contexts; using its current context", "context", cfg.Context)
	}
	member, err := clusters.New(string(name), cfg, p.opts.Scheme, log)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	start := time.Now()
	if err := member.StartAndSync(p.runCtx, p.opts.SyncTimeout, p.opts.WatchedObjects...); err != nil {
		if errors.Is(err, clusters.ErrKindMissing) {
			log.Info("Member does not serve a watched kind; will try again", "reason", err.Error(), "after", p.opts.MissingKindRetry)
			return reconcile.Result{RequeueAfter: p.opts.MissingKindRetry}, nil
		}
		return reconcile.Result{}, fmt.Errorf("start member %q: %w", name, err)
	}

	p.mu.Lock()
	for _, idx := range p.indexers {
		if err := member.GetFieldIndexer().IndexField(member.Context(), idx.obj, idx.field, idx.extract); err != nil {
			p.mu.Unlock()
			member.Stop()
			return reconcile.Result{}, fmt.Errorf("index %s on member %q: %w", idx.field, name, err)
		}
	}
	p.members[name] = &registration{member: member, hash: hash}
	p.mu.Unlock()

	if err := p.aware.Engage(member.Context(), name, member); err != nil {
		p.disengage(name, log, "engage failed")
		return reconcile.Result{}, fmt.Errorf("engage member %q: %w", name, err)
	}
	log.Info("Engaged member", "context", cfg.Context, "host", cfg.REST.Host, "took", time.Since(start).Round(time.Millisecond))
	return reconcile.Result{}, nil
}

// disengage stops the member called name, if any, and waits for its cache to stop.
func (p *Provider) disengage(name multicluster.ClusterName, log logr.Logger, why string) {
	p.mu.Lock()
	r, ok := p.members[name]
	delete(p.members, name)
	p.mu.Unlock()
	if !ok {
		return
	}
	r.member.Stop()
	log.Info("Disengaged member", "why", why)
}
