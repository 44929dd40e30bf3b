package clusterprofile

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/providers/members"
)

// The hub reads the ClusterProfiles of the registration namespace (another
// namespace, given with --clusterprofile-namespace, needs the same grant there).
// Its MemberCluster is owned by the ClusterProfile with blockOwnerDeletion
// (see the kubeconfig source's Secrets).
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,namespace=widgethub-system,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,namespace=widgethub-system,resources=clusterprofiles/finalizers,verbs=update

// Options configure the ClusterProfile Source.
type Options struct {
	// Namespace holds the ClusterProfiles that register members.
	Namespace string
	// Access is the administrator's access provider file (LoadProviderFile).
	Access *access.Config
	// Config makes member configs (QPS, destination checks, ...).
	Config connect.ConfigOptions
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
func (s *Source) Config(reg *members.Registration) (*connect.Config, error) {
	profile, ok := reg.Owner.(*inventoryv1alpha1.ClusterProfile)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a ClusterProfile", connect.ErrInvalidKubeconfig, reg.Owner.GetName())
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

// config builds the member config of profile (connect.ProfileConfig); a
// profile naming none of the administrator's providers is refused with
// NoAccessProvider, and nothing is run.
func (s *Source) config(profile *inventoryv1alpha1.ClusterProfile) (*connect.Config, error) {
	cfg, err := connect.ProfileConfig(profile, s.opts.Access, s.opts.Config)
	if errors.Is(err, connect.ErrNoAccessProvider) {
		return nil, &members.Refusal{Reason: v1alpha1.MemberNoAccessProviderReason, Err: err}
	}
	return cfg, err
}

// LoadProviderFile reads the administrator's access provider file:
// connect.LoadAccessProviders, which refuses the policies that would let a
// ClusterProfile add arguments or environment variables to the command.
func LoadProviderFile(path string) (*access.Config, error) {
	return connect.LoadAccessProviders(path)
}
