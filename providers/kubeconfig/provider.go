package kubeconfig

import (
	"context"
	"crypto/sha256"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/providers/members"
)

// CacheOptions extends a hub cache's options with the registration Secrets
// of namespace: the hub reads no other Secret.
func CacheOptions(opts cache.Options, namespace string) cache.Options {
	return members.CacheObjects(opts, namespace, &corev1.Secret{}, cache.ByObject{
		Namespaces: map[string]cache.Config{namespace: {}},
		Label:      labels.SelectorFromSet(labels.Set{registration.SecretLabel: "true"}),
	})
}

// The hub reads registration Secrets in its registration namespace only. A
// MemberCluster is owned by its Secret with blockOwnerDeletion, which the
// OwnerReferencesPermissionEnforcement admission plugin (OpenShift) allows
// only to who may update the Secret's finalizers.
// +kubebuilder:rbac:groups="",namespace=widgethub-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=widgethub-system,resources=secrets/finalizers,verbs=update

// Source is the registration source of kubeconfig Secrets: a Secret of its
// namespace labelled registration.SecretLabel=true registers the member
// named after it, with the kubeconfig in its registration.SecretKey data key.
type Source struct {
	namespace string
	config    connect.ConfigOptions
	hub       client.Reader
	// writer writes renewed tokens into registrations; nil: none is renewed.
	writer client.Writer
}

var _ members.Source = (*Source)(nil)

// New returns the Source of the registration Secrets in namespace, read
// from hub (the hub manager's client), whose kubeconfigs become member
// configs with config. The tokens of the registrations join marked
// renewable are written back through hub (renew.go).
func New(namespace string, config connect.ConfigOptions, hub client.Client) *Source {
	if namespace == "" {
		namespace = registration.DefaultNamespace
	}
	return &Source{namespace: namespace, config: config, hub: hub, writer: hub}
}

// Kind is "Secret".
func (s *Source) Kind() string { return "Secret" }

// ControllerName is the name of the Secret controller.
func (s *Source) ControllerName() string { return "kubeconfig-provider" }

// Object is a Secret.
func (s *Source) Object() client.Object { return &corev1.Secret{} }

// Registration reads the registration Secret key from the hub cache; nil
// when it is gone, being deleted or no longer labelled.
func (s *Source) Registration(ctx context.Context, key types.NamespacedName) (*members.Registration, error) {
	if key.Namespace != s.namespace {
		return nil, nil
	}
	secret := &corev1.Secret{}
	if err := s.hub.Get(ctx, key, secret); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !secret.DeletionTimestamp.IsZero() || secret.Labels[registration.SecretLabel] != "true" {
		return nil, nil
	}
	return &members.Registration{
		Owner:   secret,
		Hash:    sha256.Sum256(secret.Data[registration.SecretKey]),
		Pin:     secret.Annotations[registration.PinAnnotation],
		Renewal: s.renewal(secret),
	}, nil
}

// Config builds the member config of reg's Secret from its kubeconfig.
func (s *Source) Config(reg *members.Registration) (*connect.Config, error) {
	secret, ok := reg.Owner.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a Secret", connect.ErrInvalidKubeconfig, reg.Owner.GetName())
	}
	data := secret.Data[registration.SecretKey]
	if len(data) == 0 {
		return nil, &members.Refusal{Reason: v1alpha1.MemberInvalidKubeconfigReason,
			Err: fmt.Errorf("the Secret has no %q data key", registration.SecretKey)}
	}
	return connect.RESTConfig(data, s.config)
}

// List lists the registration Secrets in the hub cache that are not being deleted.
func (s *Source) List(ctx context.Context) ([]members.Registration, error) {
	list := &corev1.SecretList{}
	if err := s.hub.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{registration.SecretLabel: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list the registration Secrets: %w", err)
	}
	regs := make([]members.Registration, 0, len(list.Items))
	for i := range list.Items {
		if secret := &list.Items[i]; secret.DeletionTimestamp.IsZero() {
			regs = append(regs, members.Registration{Owner: secret, Pin: secret.Annotations[registration.PinAnnotation]})
		}
	}
	return regs, nil
}
