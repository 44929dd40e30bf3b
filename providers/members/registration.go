package members

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

// Source is a kind of hub object that registers members: each object of it
// registers one member, named after the object.
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
	// List is every registration of the source (their Owner and Pin; Config
	// may be nil), for counting them and sharing them among replicas.
	List(ctx context.Context) ([]Registration, error)
}

// Registration is what one object registers: a member named after Owner,
// whose config Config builds.
type Registration struct {
	// Owner is the registering object: it owns the MemberCluster and its
	// Events are recorded on it.
	Owner client.Object
	// Hash identifies what Config builds the config from: a registration
	// whose Hash did not change keeps its engagement, and Config is not
	// called again.
	Hash [sha256.Size]byte
	// Config builds the member's config. Its error is shown as the Ready
	// reason: a *Refusal's, else ExecPluginRefused, UnsafeKubeconfig or
	// InvalidKubeconfig after the clusters error it wraps. The member is not
	// retried until the registration changes.
	Config func() (*clusters.Config, error)
	// Pin is the replica the member is pinned to on a sharded hub.
	Pin string
	// Renewal, when set, has the hub renew the registration's bearer token
	// before it expires (renew.go).
	Renewal *TokenRenewal

	// kind is the source's Kind, for messages.
	kind string
}

// Refusal is an error of Registration.Config with the Ready reason to show.
type Refusal struct {
	Reason string
	Err    error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// refusalReason is the Ready reason of an error of Registration.Config.
func refusalReason(err error) string {
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		return refusal.Reason
	case errors.Is(err, clusters.ErrExecPluginRefused):
		return v1alpha1.MemberExecPluginRefusedReason
	case errors.Is(err, clusters.ErrUnsafeKubeconfig):
		return v1alpha1.MemberUnsafeKubeconfigReason
	}
	return v1alpha1.MemberInvalidKubeconfigReason
}

// sourceController reconciles the registrations of one Source.
type sourceController struct {
	Source
	provider *Provider
	// index orders the sources: a lower one keeps a name both claim.
	index int
	log   logr.Logger
	// workers builds the controller's queue and the context of each reconcile.
	workers *registrationWorkers
	// wake reconciles a registration of this source (one that waits for
	// its name, or holds it and must show a conflict that began or ended).
	wake chan event.TypedGenericEvent[reconcile.Request]
}

// Reconcile engages, probes or disengages the member of one registration.
// Its member calls run under a context the queue may cancel to give the
// worker to another registration (registrationWorkers); a reconcile so cut
// short fails, and is retried.
func (sc *sourceController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	memberCtx, release := sc.workers.context(ctx, req)
	defer release()
	result, err := sc.provider.reconcile(ctx, memberCtx, sc, req)
	return reclaimed(memberCtx, result, err)
}

// claim is one registration of a member name.
type claim struct {
	source *sourceController
	key    types.NamespacedName
}

func (c claim) String() string { return c.source.Kind() + " " + c.key.String() }

// claimFor makes me, whose registration is reg, hold the member name,
// unless a registration of an earlier source holds it: then it returns
// that one and false, and me waits as the name's loser. A registration of
// a later source that held the name loses it: its member stops, its
// MemberCluster goes, and it is woken to report the conflict.
func (p *Provider) claimFor(ctx context.Context, name multicluster.ClusterName, me claim, reg *Registration, log logr.Logger) (claim, bool) {
	p.mu.Lock()
	holder, held := p.claims[name]
	switch {
	case !held || holder == me:
		p.claims[name] = me
		if p.losers[name] == me {
			delete(p.losers, name)
		}
		p.mu.Unlock()
		return me, true
	case holder.source.index <= me.source.index:
		loser, known := p.losers[name]
		p.losers[name] = me
		p.mu.Unlock()
		if !known || loser != me {
			holder.source.wakeUp(holder.key) // to show the conflict
			p.recorder.Eventf(reg.Owner, nil, corev1.EventTypeWarning, v1alpha1.MemberNameConflictReason, "Register",
				"member name %q is registered by %s, which keeps it; this %s is not engaged until that one goes", name, holder, me.source.Kind())
		}
		return holder, false
	}
	// me takes the name from a registration of a later source, which
	// reports the conflict (and becomes the loser) when it is woken.
	p.claims[name] = me
	p.mu.Unlock()
	p.disengage(name, log, "the name is registered by "+me.String())
	if err := p.deleteMemberCluster(ctx, holder); err != nil {
		log.Error(err, "Cannot delete the MemberCluster of the registration that lost the name", "loser", holder.String())
	}
	holder.source.wakeUp(holder.key) // to report the conflict
	return me, true
}

// unclaim forgets me, whose registration is gone, and tells whether me held
// the member name. A registration that waited for the name is woken to take
// it, and the holder, when me waited, to stop showing the conflict.
func (p *Provider) unclaim(name multicluster.ClusterName, me claim) bool {
	p.mu.Lock()
	holder, held := p.claims[name]
	loser, waits := p.losers[name]
	mine := held && holder == me
	switch {
	case mine:
		delete(p.claims, name)
		delete(p.losers, name)
	case waits && loser == me:
		delete(p.losers, name)
	}
	p.mu.Unlock()
	switch {
	case mine && waits:
		loser.source.wakeUp(loser.key)
	case !mine && waits && loser == me:
		holder.source.wakeUp(holder.key)
	}
	// A registration seen for the first time after a restart holds no claim yet.
	return mine || !held
}

// conflict is the registration that claims name but waits for it, if any.
func (p *Provider) conflict(name multicluster.ClusterName) (claim, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	c, ok := p.losers[name]
	return c, ok
}

// wakeUp reconciles the registration key of this source.
func (sc *sourceController) wakeUp(key types.NamespacedName) {
	select {
	case sc.wake <- event.TypedGenericEvent[reconcile.Request]{Object: reconcile.Request{NamespacedName: key}}:
	default:
		// The channel is full of wake-ups that reconcile anyway.
		sc.log.V(1).Info("Wake-up dropped", "registration", key)
	}
}

// deleteMemberCluster deletes the MemberCluster of registration c, if c's
// kind controls it: one that another registration of the same name owns
// stays.
func (p *Provider) deleteMemberCluster(ctx context.Context, c claim) error {
	mc := &v1alpha1.MemberCluster{}
	if err := p.apiReader.Get(ctx, c.key, mc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if owner := metav1.GetControllerOf(mc); owner != nil && (owner.Kind != c.source.Kind() || owner.Name != c.key.Name) {
		return nil
	}
	if err := p.hub.Delete(ctx, mc, client.Preconditions{UID: &mc.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete MemberCluster %s: %w", c.key, err)
	}
	return nil
}
