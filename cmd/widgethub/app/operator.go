package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/providers/clusterprofile"
	"github.com/widgethub/widgethub/providers/kubeconfig"
	"github.com/widgethub/widgethub/providers/members"
	"github.com/widgethub/widgethub/providers/sharding"
	"github.com/widgethub/widgethub/reconcilers/controller"
	"github.com/widgethub/widgethub/reconcilers/widget"
)

// LeaderElectionID names the Lease that elects the active hub manager.
const LeaderElectionID = "widgethub.widgethub.io"

// DefaultMemberMaxObjects bounds the Widgets and Deployments one member's
// caches hold: 25,000 Widgets with their Deployments, about 175 MiB of heap
// at the sizes docs/performance.md measures (2.3 KiB per cached Widget,
// 4.7 KiB per Deployment, trimmed), a third of the chart's memory limit.
const DefaultMemberMaxObjects = 50000

// DefaultMaxConcurrentReconciles suits an I/O-bound reconciler: workers mostly wait on member API servers.
const DefaultMaxConcurrentReconciles = 32

// Options are the manager's settings; BindFlags exposes them as flags.
type Options struct {
	RegistrationNamespace string
	MetricsBindAddress    string
	// MetricsSecure serves the metrics over HTTPS to the callers the hub
	// authenticates and authorizes for /metrics; false serves plain HTTP to anyone.
	MetricsSecure bool
	// MetricsCertPath is a directory with the metrics server's tls.crt and
	// tls.key; empty, the server makes a self-signed certificate.
	MetricsCertPath        string
	HealthProbeBindAddress string
	LeaderElection         bool
	MemberQPS              float64
	MemberBurst            int
	MemberSyncTimeout      time.Duration
	// MemberMaxObjects bounds the objects one member's caches hold; past
	// it the member is parked with reason TooManyObjects. Zero: no bound.
	MemberMaxObjects int
	// MemberRequestTimeout bounds every member request but watches.
	MemberRequestTimeout    time.Duration
	MaxConcurrentReconciles int
	// MaxConcurrentReconcilesPerMember bounds one member's share of the
	// workers; zero means three quarters of MaxConcurrentReconciles.
	MaxConcurrentReconcilesPerMember int
	// ReconcileTimeout is the deadline of each Widget reconcile.
	ReconcileTimeout       time.Duration
	AllowCredentialPlugins bool
	// AllowInsecureMembers accepts kubeconfigs that skip TLS verification or use http://.
	AllowInsecureMembers bool
	// AllowLinkLocalMembers lets members be reached at link-local and cloud metadata addresses.
	AllowLinkLocalMembers bool
	ProbeInterval         time.Duration
	ProbeTimeout          time.Duration
	ProbeFailureThreshold int
	// GracefulShutdownTimeout bounds how long runnables get to stop.
	GracefulShutdownTimeout time.Duration
	// Sharding shares the members among the running replicas instead of
	// electing one leader that serves them all.
	Sharding bool
	// ReplicaID names this replica among the sharded replicas: its Pod's name.
	ReplicaID string
	// AllowPinsBeyondFairShare honours every pin to a live replica, however
	// many members it pins there; without it a replica takes pinned members
	// only up to its fair share.
	AllowPinsBeyondFairShare bool
	// TokenRenewRemaining is the fraction of its lifetime a member token
	// that join minted has left when the hub renews it.
	TokenRenewRemaining float64
	// TokenRenewMinInterval is the least time between two renewals of a
	// member's token, whatever the member's tokens claim.
	TokenRenewMinInterval time.Duration
	// CredentialsExpiryWarning is how long before a token the hub does not
	// renew expires its MemberCluster shows CredentialsExpiring.
	CredentialsExpiryWarning time.Duration
	// ClusterProfileProviderFile is the administrator's access provider
	// file (sigs.k8s.io/cluster-inventory-api pkg/access); empty, members
	// are not registered by ClusterProfiles.
	ClusterProfileProviderFile string
	// ClusterProfileNamespace holds the ClusterProfiles that register
	// members; empty means RegistrationNamespace.
	ClusterProfileNamespace string

	// Clocks of the engine that are not flags: zero means the engine's
	// default. Tests set them short so that they need not wait for minutes.
	// ProbeRefresh is how stale lastProbeTime gets with nothing else changed.
	ProbeRefresh time.Duration
	// MissingKindRetry is the wait before a member without the Widget API
	// is looked at again.
	MissingKindRetry time.Duration
	// MinReengageInterval is the least time between two engagements of a
	// member whose registration changes.
	MinReengageInterval time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		RegistrationNamespace:    registration.DefaultNamespace,
		MetricsBindAddress:       ":8080",
		MetricsSecure:            true,
		HealthProbeBindAddress:   ":8081",
		LeaderElection:           true,
		MemberQPS:                connect.DefaultQPS,
		MemberBurst:              connect.DefaultBurst,
		MemberSyncTimeout:        members.DefaultSyncTimeout,
		MemberMaxObjects:         DefaultMemberMaxObjects,
		MemberRequestTimeout:     connect.DefaultRequestTimeout,
		MaxConcurrentReconciles:  DefaultMaxConcurrentReconciles,
		ReconcileTimeout:         controller.DefaultReconcileTimeout,
		ProbeInterval:            members.DefaultProbeInterval,
		ProbeTimeout:             members.DefaultProbeTimeout,
		ProbeFailureThreshold:    members.DefaultFailureThreshold,
		GracefulShutdownTimeout:  30 * time.Second,
		ReplicaID:                hostname(),
		TokenRenewRemaining:      members.DefaultRenewRemaining,
		TokenRenewMinInterval:    members.DefaultMinRenewInterval,
		CredentialsExpiryWarning: v1alpha1.TokenExpiryWarning,
	}
}

// hostname is the default replica id: in a Pod, the Pod's name.
func hostname() string {
	name, _ := os.Hostname()
	return name
}

// BindFlags registers the options as flags on fs, with o's values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.RegistrationNamespace, "registration-namespace", o.RegistrationNamespace,
		"Namespace on the hub that holds member registration Secrets (label "+registration.SecretLabel+"=true, key "+registration.SecretKey+").")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure,
		"Serve the metrics over HTTPS (a self-signed certificate unless --metrics-cert-path) to callers whose token the hub authenticates (TokenReview) and authorizes to get /metrics (SubjectAccessReview); false serves plain HTTP to anyone, for local runs.")
	fs.StringVar(&o.MetricsCertPath, "metrics-cert-path", o.MetricsCertPath,
		"Directory with the certificate (tls.crt) and key (tls.key) the HTTPS metrics server presents, reloaded when they change (a mounted kubernetes.io/tls Secret); empty, a self-signed certificate is made at start.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection,
		"Elect one active manager through a Lease in the registration namespace, so that replicas stand by and take over; false only when a single manager runs (in-process tests, the demo, the bench). Ignored with --sharding.")
	fs.BoolVar(&o.Sharding, "sharding", o.Sharding,
		"Share the members among all running replicas through Leases in the registration namespace (each member served by one replica at a time, handed over when replicas come and go) instead of electing one leader that serves them all.")
	fs.StringVar(&o.ReplicaID, "replica-id", o.ReplicaID,
		"This replica's id among the sharded replicas, unique among them; the default is the host name, which in a Pod is the Pod's name.")
	fs.Float64Var(&o.MemberQPS, "member-qps", o.MemberQPS, "Queries per second to each member API server.")
	fs.IntVar(&o.MemberBurst, "member-burst", o.MemberBurst, "Burst of queries to each member API server.")
	fs.DurationVar(&o.MemberRequestTimeout, "member-request-timeout", o.MemberRequestTimeout,
		"Bound on every request to a member but watches: a member that accepts connections and never answers frees the worker then.")
	fs.DurationVar(&o.MemberSyncTimeout, "member-sync-timeout", o.MemberSyncTimeout,
		"How long a member's caches may take to sync before its engagement is retried.")
	fs.IntVar(&o.MemberMaxObjects, "member-max-objects", o.MemberMaxObjects,
		"Bound on the Widgets and Deployments one member's caches hold: past it the member is parked and reported with reason TooManyObjects (0: no bound).")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", o.MaxConcurrentReconciles,
		"Widget reconciles run at once across all members.")
	fs.IntVar(&o.MaxConcurrentReconcilesPerMember, "max-concurrent-reconciles-per-member", o.MaxConcurrentReconcilesPerMember,
		"Widget reconciles of one member run at once, so that a busy or hung member leaves workers to the others; 0 means three quarters of --max-concurrent-reconciles.")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", o.ReconcileTimeout,
		"Deadline of each Widget reconcile: one that runs past it is cut short, retried, and counted in controller_runtime_reconcile_timeouts_total.")
	fs.DurationVar(&o.ProbeInterval, "probe-interval", o.ProbeInterval, "Time between health probes of each engaged member.")
	fs.DurationVar(&o.ProbeTimeout, "probe-timeout", o.ProbeTimeout, "Bound on one health probe (and on the checks before a member is engaged).")
	fs.IntVar(&o.ProbeFailureThreshold, "probe-failure-threshold", o.ProbeFailureThreshold,
		"Failed probes in a row after which a member is reported Unreachable.")
	fs.BoolVar(&o.AllowCredentialPlugins, "allow-credential-plugins", o.AllowCredentialPlugins,
		"Allow registration kubeconfigs with exec or auth-provider sections (they run programs inside the hub).")
	fs.BoolVar(&o.AllowInsecureMembers, "allow-insecure-members", o.AllowInsecureMembers,
		"Allow registration kubeconfigs that skip TLS verification (insecure-skip-tls-verify) or use an http:// server.")
	fs.StringVar(&o.ClusterProfileProviderFile, "clusterprofile-provider-file", o.ClusterProfileProviderFile,
		"Access provider file (JSON, cluster-inventory-api's format) that lets ClusterProfiles register members: each names the exec plugin that gets a member's credentials; empty, ClusterProfiles are not read.")
	fs.StringVar(&o.ClusterProfileNamespace, "clusterprofile-namespace", o.ClusterProfileNamespace,
		"Namespace on the hub whose ClusterProfiles register members (with --clusterprofile-provider-file); empty means --registration-namespace.")
	fs.BoolVar(&o.AllowLinkLocalMembers, "allow-link-local-members", o.AllowLinkLocalMembers,
		"Allow connections to members at link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254, ...).")
	fs.Float64Var(&o.TokenRenewRemaining, "token-renew-remaining", o.TokenRenewRemaining,
		"Fraction of its lifetime a member token minted by kubectl widgethub join has left when the hub renews it (between 0 and 1).")
	fs.DurationVar(&o.TokenRenewMinInterval, "token-renew-min-interval", o.TokenRenewMinInterval,
		"Least time between two renewals of a member's token, whatever the member's tokens claim.")
	fs.BoolVar(&o.AllowPinsBeyondFairShare, "allow-pins-beyond-fair-share", o.AllowPinsBeyondFairShare,
		"With --sharding, honour every pin (annotation "+registration.PinAnnotation+") to a live replica however many members it pins there; by default a replica takes pinned members only up to its fair share and the others are shared out like unpinned ones.")
	fs.DurationVar(&o.CredentialsExpiryWarning, "credentials-expiry-warning", o.CredentialsExpiryWarning,
		"How long before a member token the hub does not renew expires the MemberCluster shows CredentialsExpiring.")
}

// Leader election and hub Events (leader election records its "became leader"
// Event through the core API, the rest through events.k8s.io).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=widgethub-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=widgethub-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=widgethub-system,resources=events,verbs=create;patch

// New builds the hub manager for the hub at cfg with every controller registered.
func New(cfg *rest.Config, opts Options) (mcmanager.Manager, error) {
	if r := opts.TokenRenewRemaining; r <= 0 || r >= 1 {
		return nil, fmt.Errorf("--token-renew-remaining %v: want a fraction between 0 and 1", r)
	}
	scheme := clusters.NewScheme()
	userAgent := "widgethub"
	var shards *sharding.Options
	if opts.Sharding {
		if opts.ReplicaID == "" {
			return nil, errors.New("--sharding needs a --replica-id")
		}
		shards = &sharding.Options{ReplicaID: opts.ReplicaID, AllowPinsBeyondFairShare: opts.AllowPinsBeyondFairShare}
		// Every replica serves; the member API servers can tell them apart.
		opts.LeaderElection = false
		userAgent += "/" + opts.ReplicaID
	}
	memberConfig := connect.ConfigOptions{
		QPS:                    float32(opts.MemberQPS),
		Burst:                  opts.MemberBurst,
		AllowCredentialPlugins: opts.AllowCredentialPlugins,
		AllowInsecure:          opts.AllowInsecureMembers,
		AllowLinkLocal:         opts.AllowLinkLocalMembers,
		UserAgent:              userAgent,
		RequestTimeout:         opts.MemberRequestTimeout,
	}
	var profiles *clusterprofile.Options
	if opts.ClusterProfileProviderFile != "" {
		access, err := clusterprofile.LoadProviderFile(opts.ClusterProfileProviderFile)
		if err != nil {
			return nil, err
		}
		profiles = &clusterprofile.Options{Namespace: opts.ClusterProfileNamespace, Access: access, Config: memberConfig}
		if profiles.Namespace == "" {
			profiles.Namespace = opts.RegistrationNamespace
		}
		if err := clusterprofile.AddToScheme(scheme); err != nil {
			return nil, err
		}
	}
	provider := members.New(members.Options{
		Namespace:      opts.RegistrationNamespace,
		Scheme:         scheme,
		SyncTimeout:    opts.MemberSyncTimeout,
		WatchedObjects: []client.Object{&v1alpha1.Widget{}, &appsv1.Deployment{}},
		// A member's cache holds only the Deployments widgethub manages, and
		// of them and its Widgets only what the reconciler reads.
		CacheByObject:       map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Label: widget.ManagedDeployments()}},
		CacheTransform:      widget.CacheTransform,
		MaxObjects:          opts.MemberMaxObjects,
		ProbeInterval:       opts.ProbeInterval,
		ProbeTimeout:        opts.ProbeTimeout,
		FailureThreshold:    opts.ProbeFailureThreshold,
		ProbeRefresh:        opts.ProbeRefresh,
		MissingKindRetry:    opts.MissingKindRetry,
		MinReengageInterval: opts.MinReengageInterval,
		Sharding:            shards,
		Renewal: members.RenewalOptions{Remaining: opts.TokenRenewRemaining, MinInterval: opts.TokenRenewMinInterval,
			ExpiryWarning: opts.CredentialsExpiryWarning},
	})
	hubCache := members.CacheOptions(kubeconfig.CacheOptions(cache.Options{}, opts.RegistrationNamespace), opts.RegistrationNamespace)
	if profiles != nil {
		hubCache = clusterprofile.CacheOptions(hubCache, profiles.Namespace)
	}
	metrics, err := metricsOptions(opts)
	if err != nil {
		return nil, err
	}
	shutdown := opts.GracefulShutdownTimeout
	mgr, err := mcmanager.New(cfg, provider, manager.Options{
		Scheme:                  scheme,
		Cache:                   hubCache,
		Metrics:                 metrics,
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.RegistrationNamespace,
		// A stopping leader hands over at once instead of after the Lease
		// expires: safe because the manager's process exits when Start returns
		// (cmd/widgethub), after every reconcile has stopped.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdown,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add readyz check: %w", err)
	}
	// The kubeconfig Secrets register first: a member name that a
	// ClusterProfile claims too stays the Secret's.
	hub := mgr.GetLocalManager().GetClient()
	if err := provider.Register(mgr, kubeconfig.New(opts.RegistrationNamespace, memberConfig, hub)); err != nil {
		return nil, fmt.Errorf("set up the kubeconfig Secret registrations: %w", err)
	}
	if profiles != nil {
		if err := provider.Register(mgr, clusterprofile.New(*profiles, hub)); err != nil {
			return nil, fmt.Errorf("set up the ClusterProfile registrations: %w", err)
		}
	}
	if _, err := controller.New(widget.ControllerName, mgr, controller.Options{
		Reconciler:                       &widget.Reconciler{Clusters: mgr},
		MaxConcurrentReconciles:          opts.MaxConcurrentReconciles,
		MaxConcurrentReconcilesPerMember: opts.MaxConcurrentReconcilesPerMember,
		ReconcileTimeout:                 opts.ReconcileTimeout,
		// The engine judges each member's health from its outcomes.
		Outcomes: provider,
	}, widget.Sources()...); err != nil {
		return nil, fmt.Errorf("set up widget controller: %w", err)
	}
	return mgr, nil
}

// ReconcilesPerMember is MaxConcurrentReconcilesPerMember with its default applied:
// how many Widget reconciles of one member run at once.
func (o Options) ReconcilesPerMember() int {
	return controller.PerMember(o.MaxConcurrentReconciles, o.MaxConcurrentReconcilesPerMember)
}

// Start builds the hub manager for cfg and runs it in the background until
// ctx ends or the returned stop is called; stop waits for the manager to end
// (up to GracefulShutdownTimeout and half a minute more) and returns its error.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (stop func() error, err error) {
	mgr, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(opts.GracefulShutdownTimeout + 30*time.Second):
			return errors.New("the manager did not stop in time")
		}
	}, nil
}
