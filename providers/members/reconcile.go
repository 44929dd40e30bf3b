package members

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// sourceController reconciles the registrations of one Source.
type sourceController struct {
	Source
	provider *Provider
	// index orders the sources: a lower one keeps a name both claim.
	index int
	log   logr.Logger
	// workers builds the controller's queue and the context of each reconcile.
	workers *registrationWorkers
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

// wakeUp reconciles the registration key of this source: one that waits for
// its name, holds it and must show a conflict, or whose owner changed. It
// goes straight into the controller's queue, which holds each key once
// however many wake it: a fleet's worth of wake-ups at once (a replica that
// died, a new one) is never dropped. Before the controller starts there is
// no queue, and no need: its first list reconciles every registration.
func (sc *sourceController) wakeUp(key types.NamespacedName) {
	sc.workers.add(reconcile.Request{NamespacedName: key})
}

// reconcile is one registration's story: read it; if it is gone, let its
// member go; else hold its member name, ask the ownership whether this
// replica serves the member, take the member one step (engage, probe, park,
// engage afresh, swap its token), renew its token when due, and write what
// was seen into the MemberCluster. The member's checks, cache sync and
// probes run under memberCtx, which the queue may cancel to take the worker
// back; what is written on the hub (fences, MemberCluster, Events) runs
// under ctx, so that a reconcile cut short still records what it did.
func (p *Provider) reconcile(ctx, memberCtx context.Context, sc *sourceController, req reconcile.Request) (reconcile.Result, error) {
	name := multicluster.ClusterName(req.Name)
	log := sc.log.WithValues("cluster", name, "registration", req.NamespacedName)
	select {
	case <-p.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}

	reg, err := sc.Registration(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get the %s registration %s: %w", sc.Kind(), req.NamespacedName, err)
	}
	me := claim{source: sc, key: req.NamespacedName}
	if reg == nil {
		return reconcile.Result{}, p.unregister(ctx, name, me, log)
	}
	if !p.holdName(ctx, name, me, reg, log) {
		return reconcile.Result{}, nil // another registration keeps the name; this one waits for it to go
	}
	serving, err := p.ownership.serve(ctx, string(name), reg)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !serving.here {
		// A fence not released is retried: nothing else would wake this
		// registration while the owner waits for the fence.
		if err := p.handOver(ctx, name, serving.owner, log); err != nil {
			return reconcile.Result{}, err
		}
		return serving.result, nil
	}
	m, err := p.registry.serve(name, me, func() *member { return newMember(name, p.env, log) })
	if m == nil {
		return reconcile.Result{}, err // nil: the name went to another registration meanwhile
	}
	if wait := m.reengageWait(reg.Hash); wait > 0 {
		// The registration changed again soon after the last engagement:
		// take its latest version once the interval has passed.
		log.V(1).Info("Registration changed; re-engaging later", "after", wait)
		return reconcile.Result{RequeueAfter: wait}, nil
	}

	obs := m.sync(ctx, memberCtx, change{hash: reg.Hash, term: serving.term,
		config:   func() (*connect.Config, error) { return sc.Config(reg) },
		announce: func(replacing bool) *v1alpha1.MemberCluster { return p.recordEngaging(ctx, reg.Owner, replacing, log) }})
	writer, _ := sc.Source.(TokenWriter)
	m.renew(ctx, memberCtx, reg, writer, &obs)
	refreshIn, err := p.recordStatus(ctx, reg.Owner, obs)
	if err != nil {
		// Retried even after a terminal outcome: that outcome is not shown
		// until the write succeeds.
		if obs.err != nil {
			err = fmt.Errorf("%s; %w", obs.err.Error(), err)
		}
		return reconcile.Result{}, v1alpha1.PrintableError(err)
	}
	obs.probeBy(refreshIn, p.opts.ProbeInterval)
	return obs.result, v1alpha1.PrintableError(obs.err)
}

// holdName makes me, whose registration is reg, hold the member name,
// unless a registration of an earlier source holds it: then me waits for
// it, and is told so by a Warning Event the first time. A registration of a
// later source that held the name loses it: its member stops, its
// MemberCluster goes, and it is woken to report the conflict.
func (p *Provider) holdName(ctx context.Context, name multicluster.ClusterName, me claim, reg *Registration, log logr.Logger) bool {
	c := p.registry.claim(name, me)
	switch {
	case !c.held:
		log.V(1).Info("Another registration holds the member name", "holder", c.holder.String())
		if c.waits {
			c.holder.source.wakeUp(c.holder.key) // to show the conflict
			p.recorder.Eventf(reg.Owner, nil, corev1.EventTypeWarning, v1alpha1.MemberNameConflictReason, "Register",
				"member name %q is registered by %s, which keeps it; this %s is not engaged until that one goes", name, c.holder, me.source.Kind())
		}
		return false
	case c.displaced != nil:
		p.leave(ctx, name, "the name is registered by "+me.String())
		// Its fence goes too: the one this registration takes is owned by
		// it, and does not go with the registration that lost the name.
		if err := p.ownership.release(ctx, string(name), true); err != nil {
			log.Error(err, "Cannot delete the fence of the registration that lost the name", "loser", c.displaced.String())
		}
		mc, err := p.controlledMemberCluster(ctx, *c.displaced)
		if err == nil && mc != nil {
			err = p.deleteMemberCluster(ctx, mc)
		}
		if err != nil {
			log.Error(err, "Cannot delete the MemberCluster of the registration that lost the name", "loser", c.displaced.String())
		}
		c.displaced.source.wakeUp(c.displaced.key) // to report the conflict
	}
	return true
}

// unregister lets the member of a registration that is gone (deleted, being
// deleted, or no longer a registration) go, if me held its name: its member
// stops, its metrics and fence go, and its MemberCluster is deleted (the
// garbage collector would remove it with a deleted Secret, but not with one
// that lost its label) by the replica the ownership says cleans it.
func (p *Provider) unregister(ctx context.Context, name multicluster.ClusterName, me claim, log logr.Logger) error {
	mine, wake := p.registry.unclaim(name, me)
	if wake != nil {
		// Once the member of me has gone: woken before, the waiting
		// registration would find it still served, and take it over.
		defer wake.source.wakeUp(wake.key)
	}
	if !mine {
		return nil
	}
	p.leave(ctx, name, "registration is gone")
	if err := p.ownership.release(ctx, string(name), true); err != nil {
		return err
	}
	mc, err := p.controlledMemberCluster(ctx, me)
	if err != nil {
		return err
	}
	servedBy := ""
	if mc != nil {
		servedBy = mc.Status.ServedBy
	}
	// Asked even when another replica deleted the MemberCluster first: the
	// members are shared out again without this one, which can move others,
	// and every replica must see the move.
	if cleans, err := p.ownership.cleans(ctx, string(name), servedBy); err != nil || !cleans || mc == nil {
		return err
	}
	return p.deleteMemberCluster(ctx, mc)
}

// handOver stops serving the member called name, which owner (another
// replica, or none while this one does not serve) serves now: it drains it
// and releases its fence so that owner may take it at once. A release that
// fails is returned, to be tried again: the owner cannot take a fence this
// live replica holds.
func (p *Provider) handOver(ctx context.Context, name multicluster.ClusterName, owner string, log logr.Logger) error {
	m := p.registry.remove(name)
	if m != nil {
		m.leave(ctx, p.opts.DrainTimeout, "handed over to "+owner)
		forgetMetrics(string(name))
		log.Info("Handed the member over", "to", owner)
	}
	return p.ownership.release(ctx, string(name), false)
}

// leave stops serving the member called name at once, if it is served.
func (p *Provider) leave(ctx context.Context, name multicluster.ClusterName, why string) {
	if m := p.registry.remove(name); m != nil {
		m.leave(ctx, 0, why)
	}
	forgetMetrics(string(name))
}

// controlledMemberCluster reads, from the API server, the MemberCluster of
// registration c if c's kind controls it; nil when there is none or another
// registration of the same name owns it.
func (p *Provider) controlledMemberCluster(ctx context.Context, c claim) (*v1alpha1.MemberCluster, error) {
	mc := &v1alpha1.MemberCluster{}
	if err := p.apiReader.Get(ctx, c.key, mc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if owner := metav1.GetControllerOf(mc); owner != nil && (owner.Kind != c.source.Kind() || owner.Name != c.key.Name) {
		return nil, nil
	}
	return mc, nil
}

// deleteMemberCluster deletes mc unless it changed since it was read: another
// registration of the same name may have made it its own meanwhile (reown
// keeps its UID). A conflict is returned, so that the caller reads it again.
func (p *Provider) deleteMemberCluster(ctx context.Context, mc *v1alpha1.MemberCluster) error {
	unchanged := client.Preconditions{UID: &mc.UID, ResourceVersion: &mc.ResourceVersion}
	if err := p.hub.Delete(ctx, mc, unchanged); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete MemberCluster %s: %w", client.ObjectKeyFromObject(mc), err)
	}
	return nil
}
