package members

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/providers/sharding"
)

// startSharded runs this replica's heartbeat while the provider runs; when
// ctx ends it hands every member over (drains it, releases its fence) and
// then retires the heartbeat, so that the other replicas take over at once.
func (p *Provider) startSharded(ctx context.Context) error {
	shards := p.shards
	// The heartbeat outlives ctx until the members are handed over.
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBeat()
	shards.Beat(beatCtx)
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		shards.Run(beatCtx, p.leaseEvents)
	}()
	close(p.started)
	<-ctx.Done()

	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	regs, parked := p.takeAll()
	handOverCtx, cancel := context.WithTimeout(beatCtx, p.opts.DrainTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for name, r := range regs {
		wg.Go(func() { p.drain(handOverCtx, name, r.member, p.log.WithValues("cluster", name)) })
	}
	for name, pk := range parked {
		pk.prober.Stop()
		clusters.ForgetMetrics(string(name))
	}
	wg.Wait()
	for _, name := range shards.HeldMembers() {
		if err := shards.Release(handOverCtx, name, false); err != nil {
			p.log.Error(err, "Could not release a member's fence; it is taken over once this replica's heartbeat expires", "cluster", name)
		}
	}
	stopBeat()
	<-beating
	retireCtx, cancelRetire := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelRetire()
	if err := shards.Retire(retireCtx); err != nil {
		p.log.Error(err, "Could not delete the replica's heartbeat Lease; the others take over when it expires")
	}
	sharding.MembersOwned.DeleteLabelValues(shards.ReplicaID())
	p.log.Info("Handed every member over", "members", len(regs)+len(parked))
	return nil
}

// serve decides whether this replica serves the member of reg. It hands
// the member over when another replica owns it (or when this replica's term
// changed since it was engaged), and takes the member's fence when this one
// owns it. It returns the term to engage in, or done with how the reconcile
// ends.
func (p *Provider) serve(ctx context.Context, name multicluster.ClusterName, reg *Registration, log logr.Logger) (
	term uint64, done bool, result reconcile.Result, err error) {
	shards := p.shards
	me := shards.ReplicaID()
	owner, err := p.owner(ctx, name, reg)
	if err != nil {
		return 0, true, reconcile.Result{}, err
	}
	current := shards.Term()
	p.mu.RLock()
	r, pk, closing := p.members[name], p.parked[name], p.closing
	p.mu.RUnlock()
	stale := (r != nil && r.term != current) || (pk != nil && pk.term != current)
	if owner != me || stale || closing {
		p.handOver(ctx, name, log, owner)
		if owner != me || closing {
			return 0, true, reconcile.Result{}, nil
		}
	}
	term, err = shards.Acquire(ctx, string(name), reg.Owner)
	var held *sharding.HeldError
	switch {
	case errors.As(err, &held):
		// Its holder drains it and releases the fence, which wakes this
		// registration; look again after a heartbeat in any case.
		log.V(1).Info("Waiting for the member's previous replica to hand it over", "holder", held.Holder)
		return 0, true, reconcile.Result{RequeueAfter: shards.RenewInterval()}, nil
	case errors.Is(err, sharding.ErrNotServing):
		return 0, true, reconcile.Result{RequeueAfter: shards.RenewInterval()}, nil
	case err != nil:
		return 0, true, reconcile.Result{}, err
	}
	return term, false, reconcile.Result{}, nil
}

// handOver stops serving the member called name: it drains it if engaged,
// stops its prober if parked, removes its metric series and releases its
// fence so that owner, its next replica, may take it at once.
func (p *Provider) handOver(ctx context.Context, name multicluster.ClusterName, log logr.Logger, owner string) {
	r, served := p.take(name)
	if r != nil {
		drainCtx, cancel := context.WithTimeout(ctx, p.opts.DrainTimeout)
		p.drain(drainCtx, name, r.member, log)
		cancel()
	}
	if served {
		clusters.ForgetMetrics(string(name))
		log.Info("Handed the member over", "to", owner)
	}
	if err := p.shards.Release(ctx, string(name), false); err != nil {
		log.Error(err, "Could not release the member's fence; it is taken over once this replica's heartbeat expires")
	}
}

// drain refuses the member's new requests, waits for those in flight and
// stops it; its sources and queued requests go with its context.
func (p *Provider) drain(ctx context.Context, name multicluster.ClusterName, member *clusters.Member, log logr.Logger) {
	if err := member.Drain(ctx); err != nil {
		log.Error(err, "Member requests still in flight when its drain timed out")
	}
	clusters.MemberEngagedSince.WithLabelValues(string(name)).Set(0)
}

// gate is the check before every request to a member engaged in term.
func (p *Provider) gate(term uint64) func() error {
	if p.shards == nil {
		return nil
	}
	return p.shards.Gate(term)
}

// servedBy is what MemberCluster.status.servedBy shows: this replica when sharded.
func (p *Provider) servedBy() string {
	if p.shards == nil {
		return ""
	}
	return p.shards.ReplicaID()
}

// countOwned updates widgethub_members_owned.
func (p *Provider) countOwned() {
	if p.shards == nil {
		return
	}
	p.mu.RLock()
	n := len(p.members) + len(p.parked)
	p.mu.RUnlock()
	sharding.MembersOwned.WithLabelValues(p.shards.ReplicaID()).Set(float64(n))
}

// leaseChanged maps a fence Lease to its registration, and asks the
// heartbeat for an early look on a change of a replica's Lease.
func (p *Provider) leaseChanged(_ context.Context, obj client.Object) []reconcile.Request {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	if member, ok := lease.Annotations[sharding.ClusterAnnotation]; ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.opts.Namespace, Name: member}}}
	}
	if lease.Labels[sharding.LeaseLabel] != "" {
		select {
		case p.leaseEvents <- struct{}{}:
		default:
		}
	}
	return nil
}

// assignment is which replica serves each member, as computed from the live
// replicas and the registrations in the hub cache.
type assignment struct {
	live   []string
	pins   map[string]string
	owners map[string]string
	// unpinned are the pins the assignment did not follow, and why.
	unpinned map[string]sharding.Unpinned
}

// owner is the replica that serves the member of reg (nil: the registration
// is gone). The assignment is computed again when the live replicas or the
// registrations changed since the last one; the members it moves are
// reconciled, so that they are handed over.
func (p *Provider) owner(ctx context.Context, name multicluster.ClusterName, reg *Registration) (string, error) {
	live := p.shards.Live()
	p.assignMu.Lock()
	defer p.assignMu.Unlock()
	a := p.assigned
	pin, registered := "", reg != nil
	if registered {
		pin = reg.Pin
	}
	if a != nil && slices.Equal(a.live, live) {
		if was, ok := a.pins[string(name)]; ok == registered && was == pin {
			return a.owners[string(name)], nil
		}
	}
	list, err := p.sources[0].List(ctx)
	if err != nil {
		return "", fmt.Errorf("list the registrations to share them among replicas: %w", err)
	}
	next := &assignment{live: live, pins: map[string]string{}}
	for _, r := range list {
		next.pins[r.Owner.GetName()] = r.Pin
	}
	if registered {
		next.pins[string(name)] = pin // the cache may be a moment behind this reconcile
	} else {
		delete(next.pins, string(name))
	}
	regs := make([]sharding.Registration, 0, len(next.pins))
	for member, pin := range next.pins {
		regs = append(regs, sharding.Registration{Member: member, Pin: pin})
	}
	next.owners, next.unpinned = p.shards.Assign(regs, live)
	p.assigned = next
	if a != nil {
		var moved []reconcile.Request
		for member, owner := range next.owners {
			if was, ok := a.owners[member]; ok && was != owner && member != string(name) {
				moved = append(moved, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.opts.Namespace, Name: member}})
			}
		}
		if len(moved) > 0 {
			go p.wake(moved)
		}
	}
	if !registered {
		return a.ownerOf(string(name)), nil // who served it, for the MemberCluster
	}
	return next.owners[string(name)], nil
}

func (a *assignment) ownerOf(member string) string {
	if a == nil {
		return ""
	}
	return a.owners[member]
}

// setPinned shows on the MemberCluster of the member called name whether
// its pin is followed: condition Pinned, absent for a member without a pin.
func (p *Provider) setPinned(status *v1alpha1.MemberClusterStatus, name string) {
	if p.shards == nil {
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.MemberPinned)
		return
	}
	p.assignMu.Lock()
	a := p.assigned
	var pin string
	var unpinned sharding.Unpinned
	var refused bool
	if a != nil {
		pin = a.pins[name]
		unpinned, refused = a.unpinned[name]
	}
	p.assignMu.Unlock()
	if pin == "" {
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.MemberPinned)
		return
	}
	cond := metav1.Condition{Type: v1alpha1.MemberPinned, Status: metav1.ConditionTrue, Reason: v1alpha1.MemberPinHonouredReason,
		Message: "served by the replica it is pinned to"}
	switch {
	case refused && unpinned.Reason == sharding.PinReplicaNotLive:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.MemberPinnedReplicaNotLiveReason
		cond.Message = "the replica it is pinned to is not live; the member is shared out like an unpinned one"
	case refused:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.MemberPinBeyondFairShareReason
		cond.Message = fmt.Sprintf("the replica it is pinned to serves its fair share of %d members already; the member is shared out like an unpinned one (the manager's --allow-pins-beyond-fair-share follows every pin)", unpinned.Share)
	}
	cond.Message = v1alpha1.TruncateMessage(fmt.Sprintf("pinned to %.64q: %s", pin, cond.Message))
	meta.SetStatusCondition(&status.Conditions, cond)
}

// wake reconciles the registrations of reqs (members the assignment moved).
func (p *Provider) wake(reqs []reconcile.Request) {
	for _, req := range reqs {
		select {
		case p.moved <- event.TypedGenericEvent[reconcile.Request]{Object: req}:
		case <-p.runCtx.Done():
			return
		}
	}
}

// allRegistrations lists every registration, for a change of the live
// replicas.
func (p *Provider) allRegistrations(ctx context.Context, _ client.Object) []reconcile.Request {
	list, err := p.sources[0].List(ctx)
	if err != nil {
		p.log.Error(err, "Could not list the registrations after the live replicas changed")
		return nil
	}
	reqs := make([]reconcile.Request, len(list))
	for i := range list {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(list[i].Owner)}
	}
	return reqs
}
