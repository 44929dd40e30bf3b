package clusterprofile

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/providers/members"
)

// The hub reads the ClusterProfiles of the registration namespace (another
// namespace, given with --clusterprofile-namespace, needs the same grant there).
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,namespace=widgethub-system,resources=clusterprofiles,verbs=get;list;watch

// Options configure the ClusterProfile Source.
type Options struct {
	// Namespace holds the ClusterProfiles that register members.
	Namespace string
	// Access is the administrator's access provider file (LoadProviderFile).
	Access *access.Config
	// Config makes member configs (QPS, destination checks, ...).
	Config clusters.ConfigOptions
}

// Source is the registration source of ClusterProfiles: each ClusterProfile
// of its namespace registers the member named after it, reached at the
// server its status names through the first access provider of the
// administrator's file that it names too.
type Source struct {
	opts Options
	hub  client.Reader
}

var _ members.Source = (*Source)(nil)

// New returns the Source of the ClusterProfiles in opts.Namespace, read from
// hub (the hub manager's cached client).
func New(opts Options, hub client.Reader) *Source {
	return &Source{opts: opts, hub: hub}
}

// AddToScheme adds the ClusterProfile types to the hub's scheme.
func AddToScheme(scheme *runtime.Scheme) error {
	if err := inventoryv1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("add the ClusterProfile types to the hub scheme: %w", err)
	}
	return nil
}

// CacheOptions extends a hub cache's options with the ClusterProfiles of
// namespace and the MemberClusters they own there.
func CacheOptions(opts cache.Options, namespace string) cache.Options {
	return members.CacheObjects(opts, namespace, &inventoryv1alpha1.ClusterProfile{},
		cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}})
}

// Kind is "ClusterProfile".
func (s *Source) Kind() string { return "ClusterProfile" }

// ControllerName is the name of the ClusterProfile controller.
func (s *Source) ControllerName() string { return "clusterprofile-provider" }

// Object is a ClusterProfile.
func (s *Source) Object() client.Object { return &inventoryv1alpha1.ClusterProfile{} }

// Registration reads the ClusterProfile key from the hub cache; nil when it
// is gone or being deleted. Its hash covers what its config is built from:
// the access providers of its status.
func (s *Source) Registration(ctx context.Context, key types.NamespacedName) (*members.Registration, error) {
	if key.Namespace != s.opts.Namespace {
		return nil, nil
	}
	profile := &inventoryv1alpha1.ClusterProfile{}
	if err := s.hub.Get(ctx, key, profile); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !profile.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	used, err := json.Marshal([][]inventoryv1alpha1.AccessProvider{profile.Status.AccessProviders, profile.Status.CredentialProviders})
	if err != nil {
		return nil, fmt.Errorf("hash ClusterProfile %s: %w", key, err)
	}
	return &members.Registration{Owner: profile, Hash: sha256.Sum256(used), Pin: profile.Annotations[registration.PinAnnotation]}, nil
}

// Config builds the member config of reg's ClusterProfile (see config).
func (s *Source) Config(reg *members.Registration) (*clusters.Config, error) {
	profile, ok := reg.Owner.(*inventoryv1alpha1.ClusterProfile)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a ClusterProfile", clusters.ErrInvalidKubeconfig, reg.Owner.GetName())
	}
	return s.config(profile)
}

// List lists the ClusterProfiles in the hub cache that are not being deleted.
func (s *Source) List(ctx context.Context) ([]members.Registration, error) {
	list := &inventoryv1alpha1.ClusterProfileList{}
	if err := s.hub.List(ctx, list, client.InNamespace(s.opts.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the ClusterProfiles: %w", err)
	}
	regs := make([]members.Registration, 0, len(list.Items))
	for i := range list.Items {
		if profile := &list.Items[i]; profile.DeletionTimestamp.IsZero() {
			regs = append(regs, members.Registration{Owner: profile, Pin: profile.Annotations[registration.PinAnnotation]})
		}
	}
	return regs, nil
}

// config builds the member config of profile: access.Config.BuildConfigFromCP
// joins the server and CA of the profile's access provider with the exec
// plugin of the administrator's provider of that name, and
// clusters.ExecConfig checks the result as every member config is checked.
// Nothing the profile holds can name a command, an argument, an environment
// variable or a file: LoadProviderFile refused the policies that would let
// its extensions add arguments or environment, and the cluster fields that
// would make the hub read a file, use a proxy or skip TLS verification are
// refused here (the library would ignore some of them, silently).
func (s *Source) config(profile *inventoryv1alpha1.ClusterProfile) (*clusters.Config, error) {
	provider, cluster := s.match(profile)
	if cluster == nil {
		return nil, &members.Refusal{Reason: v1alpha1.MemberNoAccessProviderReason, Err: fmt.Errorf(
			"the ClusterProfile names the access providers %q, none of which the hub has (it has %q; see --clusterprofile-provider-file)",
			profileProviders(profile), s.providerNames())}
	}
	where := fmt.Sprintf("access provider %q", provider)
	for _, f := range []struct {
		set   bool
		field string
	}{
		{cluster.CertificateAuthority != "", "certificate-authority (a file; give certificate-authority-data)"},
		{cluster.ProxyURL != "", "proxy-url"},
		{cluster.InsecureSkipTLSVerify && !s.opts.Config.AllowInsecure, "insecure-skip-tls-verify (allowed only with --allow-insecure-members)"},
	} {
		if f.set {
			return nil, fmt.Errorf("%s: %w: the cluster's %s is not allowed", where, clusters.ErrUnsafeKubeconfig, f.field)
		}
	}
	rest, err := s.opts.Access.BuildConfigFromCP(profile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", where, clusters.ErrInvalidKubeconfig, clusters.FirstLine(err))
	}
	if rest.Host != cluster.Server {
		return nil, fmt.Errorf("%s: %w: the library chose another access provider", where, clusters.ErrInvalidKubeconfig)
	}
	rest.Insecure = cluster.InsecureSkipTLSVerify
	if rest.Insecure {
		rest.CAData = nil
	}
	rest.ServerName = cluster.TLSServerName
	return clusters.ExecConfig(rest, where, s.opts.Config)
}

// match returns the first provider of the administrator's file that profile
// names, and the cluster profile gives for it (its accessProviders before
// the deprecated credentialProviders), as access.Config does.
func (s *Source) match(profile *inventoryv1alpha1.ClusterProfile) (string, *clientcmdv1.Cluster) {
	named := map[string]*clientcmdv1.Cluster{}
	for _, list := range [][]inventoryv1alpha1.AccessProvider{profile.Status.CredentialProviders, profile.Status.AccessProviders} {
		for i := range list {
			named[list[i].Name] = &list[i].Cluster
		}
	}
	for _, p := range s.opts.Access.Providers {
		if cluster, ok := named[p.Name]; ok {
			return p.Name, cluster
		}
	}
	return "", nil
}

func (s *Source) providerNames() []string {
	names := make([]string, len(s.opts.Access.Providers))
	for i, p := range s.opts.Access.Providers {
		names[i] = p.Name
	}
	return names
}

func profileProviders(profile *inventoryv1alpha1.ClusterProfile) []string {
	var names []string
	for _, list := range [][]inventoryv1alpha1.AccessProvider{profile.Status.AccessProviders, profile.Status.CredentialProviders} {
		for _, p := range list {
			if !slices.Contains(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	return names
}

// LoadProviderFile reads the administrator's access provider file (the JSON
// of access.Config: {"providers": [{"name", "execConfig"}]}). It refuses a
// file with no provider, a provider without a name or a command, two
// providers of one name, and a provider whose profileSourcedCLIArgsPolicy or
// profileSourcedEnvVarsPolicy is other than Ignore: those let a ClusterProfile
// add arguments or environment variables (LD_PRELOAD, PATH, ...) to the
// command, and a registration must never decide what the hub runs.
func LoadProviderFile(path string) (*access.Config, error) {
	cfg, err := access.NewFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("--clusterprofile-provider-file: %w", err)
	}
	if len(cfg.Providers) == 0 {
		return nil, fmt.Errorf("--clusterprofile-provider-file %s: no providers", path)
	}
	seen := map[string]bool{}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %d has no name", path, i)
		case seen[p.Name]:
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: two providers named %q", path, p.Name)
		case p.ExecConfig == nil || p.ExecConfig.Command == "":
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %q has no execConfig.command", path, p.Name)
		case p.ProfileSourcedCLIArgsPolicy != "" && p.ProfileSourcedCLIArgsPolicy != access.ProfileSourcedCLIArgsPolicyIgnore:
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %q: profileSourcedCLIArgsPolicy %q would let a ClusterProfile add arguments to its command; only %q is allowed",
				path, p.Name, p.ProfileSourcedCLIArgsPolicy, access.ProfileSourcedCLIArgsPolicyIgnore)
		case p.ProfileSourcedEnvVarsPolicy != "" && p.ProfileSourcedEnvVarsPolicy != access.ProfileSourcedEnvVarsPolicyIgnore:
			return nil, fmt.Errorf("--clusterprofile-provider-file %s: provider %q: profileSourcedEnvVarsPolicy %q would let a ClusterProfile set its command's environment; only %q is allowed",
				path, p.Name, p.ProfileSourcedEnvVarsPolicy, access.ProfileSourcedEnvVarsPolicyIgnore)
		}
		seen[p.Name] = true
		if p.ExecConfig.APIVersion == "" {
			p.ExecConfig.APIVersion = "client.authentication.k8s.io/v1"
		}
		p.ExecConfig.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
	}
	return cfg, nil
}
