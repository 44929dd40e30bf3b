package members

import (
	"context"
	"crypto/sha256"
	"errors"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// Source is a kind of hub object that registers members: each object of it
// registers one member, named after the object. Package kubeconfig's
// Secrets and package clusterprofile's ClusterProfiles are the two.
type Source interface {
	// Kind is the registering objects' kind, as in their owner references
	// ("Secret", "ClusterProfile").
	Kind() string
	// ControllerName names the source's controller (and its metrics).
	ControllerName() string
	// Object is an empty object of the kind, for the controller to watch.
	Object() client.Object
	// Registration reads the registration that key makes; nil, and no
	// error, when there is none: the object is gone, being deleted or no
	// longer a registration.
	Registration(ctx context.Context, key types.NamespacedName) (*Registration, error)
	// Config builds the config of reg's member. Its error is shown as the
	// Ready reason: a *Refusal's, else ExecPluginRefused, UnsafeKubeconfig
	// or InvalidKubeconfig after the clusters error it wraps; the member is
	// not tried again until the registration changes.
	Config(reg *Registration) (*connect.Config, error)
	// List is every registration of the source (Owner and Pin only), for
	// counting them and sharing them among replicas.
	List(ctx context.Context) ([]Registration, error)
}

// TokenWriter is a Source whose registrations may hold a token the hub
// renews (Registration.Renewal): it writes the renewed token back.
type TokenWriter interface {
	// WriteToken writes token into reg in place of its current token, with
	// issued as its record, provided the registration is unchanged since it
	// was read (else an error wrapping ErrRegistrationChanged) and nothing
	// but the token would change in its kubeconfig, and returns the new
	// registration's Hash. A dry run checks the write only.
	WriteToken(ctx context.Context, reg *Registration, token string, issued TokenIssue, dryRun bool) ([sha256.Size]byte, error)
}

// Registration is what one object registers: a member named after Owner.
type Registration struct {
	// Owner is the registering object: it owns the MemberCluster and its
	// Events are recorded on it.
	Owner client.Object
	// Hash identifies what Source.Config builds the config from: a
	// registration whose Hash did not change keeps its engagement, and its
	// config is not built again.
	Hash [sha256.Size]byte
	// Pin is the replica the member is pinned to on a sharded hub.
	Pin string
	// Renewal, when set, has the hub renew the registration's bearer token
	// before it expires (renew.go); its Source is a TokenWriter.
	Renewal *TokenRenewal
}

// Refusal is an error of Source.Config with the Ready reason to show.
type Refusal struct {
	Reason string
	Err    error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// refusalReason is the Ready reason of an error of Source.Config.
func refusalReason(err error) string {
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		return refusal.Reason
	case errors.Is(err, connect.ErrExecPluginRefused):
		return v1alpha1.MemberExecPluginRefusedReason
	case errors.Is(err, connect.ErrUnsafeKubeconfig):
		return v1alpha1.MemberUnsafeKubeconfigReason
	}
	return v1alpha1.MemberInvalidKubeconfigReason
}
