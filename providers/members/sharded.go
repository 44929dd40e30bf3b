package members

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/providers/sharding"
)

// sharded is the ownership of a sharded hub (package sharding): the live
// replicas share the members of every source by rendezvous hashing, each
// member served under its fence Lease by one replica at a time.
type sharded struct {
	shards *sharding.Shards
	// leases is the hub cache, whose Lease events wake registrations.
	leases cache.Cache
	scheme *runtime.Scheme
	// list is every registration of every source, each name once (the
	// registration that keeps a name two sources claim).
	list func(ctx context.Context) ([]Registration, error)
	// live is the live replicas (the Shards' Live).
	live func() []string
	// drain bounds the drain of a member handed over.
	drain time.Duration
	log   logr.Logger

	// wake reconciles the registrations of the named members, or of all.
	wake func(names ...string)
	// kick asks the heartbeat for an early look at the Leases.
	kick chan struct{}
	// stopBeat ends the heartbeat, which outlives the provider's context
	// until the members are handed over; beating is closed once it ended.
	stopBeat context.CancelFunc
	beating  chan struct{}

	// ctx bounds the assignments computed after a reconcile asked.
	ctx context.Context

	mu sync.Mutex
	// assigned is the last assignment of members to replicas, computed at
	// assignedAt.
	assigned   *assignment
	assignedAt time.Time
	// pending are the members asked about too soon after the last
	// assignment: the next one, due is set, decides them and wakes them.
	pending map[string]bool
	due     bool
}

// assignEvery bounds how often a replica computes the assignment, which
// lists every registration: each new name would otherwise compute it
// afresh, so that N registrations created at once took N computations of N
// members each (O(N²)). Within a burst the names the assignment does not
// know wait for the next computation, which decides all of them at once.
const assignEvery = 100 * time.Millisecond

var _ ownership = (*sharded)(nil)

// assignment is which replica serves each member, computed from the live
// replicas and the registrations in the hub cache.
type assignment struct {
	live   []string
	pins   map[string]string
	owners map[string]string
	// unpinned are the pins the assignment did not follow, and why.
	unpinned map[string]sharding.Unpinned
}

func (s *sharded) start(ctx context.Context, wake func(names ...string)) error {
	s.ctx, s.wake, s.kick = ctx, wake, make(chan struct{}, 1)
	informer, err := s.leases.GetInformer(ctx, &coordinationv1.Lease{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watch the sharding Leases: %w", err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.leaseChanged,
		UpdateFunc: func(_, obj any) { s.leaseChanged(obj) },
		DeleteFunc: s.leaseChanged,
	}); err != nil {
		return fmt.Errorf("watch the sharding Leases: %w", err)
	}
	s.served(0) // widgethub_members_owned is served from the start
	var beatCtx context.Context
	beatCtx, s.stopBeat = context.WithCancel(context.WithoutCancel(ctx))
	s.beating = make(chan struct{})
	s.shards.Beat(beatCtx)
	go func() {
		defer close(s.beating)
		s.shards.Run(beatCtx, s.kick)
	}()
	// A change of the live replicas, or of this replica's term, may move
	// any member.
	go func() {
		for {
			select {
			case <-beatCtx.Done():
				return
			case <-s.shards.Changes():
				wake()
			}
		}
	}()
	return nil
}

// leaseChanged wakes the registration of a fence Lease that changed (a
// fence released wakes its next owner at once), and asks the heartbeat for
// an early look when a replica's Lease did.
func (s *sharded) leaseChanged(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	if member, ok := lease.Annotations[sharding.ClusterAnnotation]; ok {
		s.wake(member)
		return
	}
	if lease.Labels[sharding.LeaseLabel] != "" {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// serve hands the member over when another replica owns it (or while this
// replica does not serve at all), and takes its fence when this one owns it.
func (s *sharded) serve(ctx context.Context, name string, reg *Registration) (serving, error) {
	owner, err := s.owner(ctx, name, reg)
	if err != nil {
		return serving{}, err
	}
	if owner != s.shards.ReplicaID() {
		return serving{owner: owner}, nil
	}
	ref, err := s.ownerReference(reg.Owner)
	if err != nil {
		return serving{}, err
	}
	term, err := s.shards.Acquire(ctx, name, ref)
	var held *sharding.HeldError
	switch {
	case errors.As(err, &held):
		// Its holder drains it and releases the fence, which wakes this
		// registration; look again after a heartbeat in any case.
		s.log.V(1).Info("Waiting for the member's previous replica to hand it over", "cluster", name, "holder", held.Holder)
		return serving{owner: held.Holder, result: reconcile.Result{RequeueAfter: s.shards.RenewInterval()}}, nil
	case errors.Is(err, sharding.ErrNotServing):
		return serving{result: reconcile.Result{RequeueAfter: s.shards.RenewInterval()}}, nil
	case err != nil:
		return serving{}, err
	}
	return serving{here: true, term: term}, nil
}

// ownerReference makes obj, the registering object, the owner of its
// member's fence, so that the fence goes with it.
func (s *sharded) ownerReference(obj client.Object) (metav1.OwnerReference, error) {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("own the fence of %s: %w", obj.GetName(), err)
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID()}, nil
}

func (s *sharded) gate(term uint64) func() error { return s.shards.Gate(term) }

func (s *sharded) release(ctx context.Context, name string, gone bool) error {
	if err := s.shards.Release(ctx, name, gone); err != nil {
		return fmt.Errorf("release the fence of member %q: %w", name, err)
	}
	return nil
}

// cleans: the replica that served the member, or else its last owner,
// deletes the MemberCluster of a gone registration.
func (s *sharded) cleans(ctx context.Context, name, servedBy string) (bool, error) {
	owner, err := s.owner(ctx, name, nil)
	if err != nil {
		return false, err
	}
	me := s.shards.ReplicaID()
	return owner == me || servedBy == me, nil
}

func (s *sharded) report(status *v1alpha1.MemberClusterStatus, name string) {
	status.ServedBy = s.shards.ReplicaID()
	s.mu.Lock()
	a := s.assigned
	var pin string
	var unpinned sharding.Unpinned
	var refused bool
	if a != nil {
		pin = a.pins[name]
		unpinned, refused = a.unpinned[name]
	}
	s.mu.Unlock()
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

// drainTimeout: a member handed over is drained, so that the replica that
// takes it never writes beside this one.
func (s *sharded) drainTimeout() time.Duration { return s.drain }

// stop releases every fence this replica still holds once its members are
// drained, then retires the heartbeat, so that the others take over at once.
func (s *sharded) stop(ctx context.Context) {
	releaseCtx, cancel := context.WithTimeout(ctx, s.drain)
	defer cancel()
	for _, name := range s.shards.HeldMembers() {
		if err := s.shards.Release(releaseCtx, name, false); err != nil {
			s.log.Error(err, "Could not release a member's fence; it is taken over once this replica's heartbeat expires", "cluster", name)
		}
	}
	s.stopBeat()
	<-s.beating
	retireCtx, cancelRetire := context.WithTimeout(ctx, 5*time.Second)
	defer cancelRetire()
	if err := s.shards.Retire(retireCtx); err != nil {
		s.log.Error(err, "Could not delete the replica's heartbeat Lease; the others take over when it expires")
	}
	sharding.MembersOwned.DeleteLabelValues(s.shards.ReplicaID())
}

// served updates widgethub_members_owned.
func (s *sharded) served(n int) {
	sharding.MembersOwned.WithLabelValues(s.shards.ReplicaID()).Set(float64(n))
}

// owner is the replica that serves the member called name, registered by
// reg (nil: the registration is gone). The assignment is computed again when
// the live replicas or the registrations changed since the last one, at most
// every assignEvery: asked sooner, owner answers from the last assignment
// (no replica for a name it does not know) and leaves name to the next
// computation, which wakes it. Every computation wakes the members it moves,
// so that they are handed over.
func (s *sharded) owner(ctx context.Context, name string, reg *Registration) (string, error) {
	live := s.live()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.assigned
	pin, registered := "", reg != nil
	if registered {
		pin = reg.Pin
	}
	if a != nil && slices.Equal(a.live, live) {
		if was, ok := a.pins[name]; ok == registered && was == pin {
			return a.owners[name], nil
		}
	}
	if wait := time.Until(s.assignedAt.Add(assignEvery)); a != nil && wait > 0 {
		s.deferLocked(name, wait)
		return a.ownerOf(name), nil
	}
	next, err := s.assignLocked(ctx, live, name, reg)
	if err != nil {
		return "", err
	}
	if !registered {
		return a.ownerOf(name), nil // who served it, for the MemberCluster
	}
	return next.owners[name], nil
}

// deferLocked leaves name to the assignment due after wait.
func (s *sharded) deferLocked(name string, wait time.Duration) {
	if s.pending == nil {
		s.pending = map[string]bool{}
	}
	s.pending[name] = true
	if !s.due {
		s.dueAfterLocked(wait)
	}
}

// dueAfterLocked schedules assignPending after wait.
func (s *sharded) dueAfterLocked(wait time.Duration) {
	s.due = true
	time.AfterFunc(wait, s.assignPending)
}

// assignPending computes the assignment the members asked about in a burst
// wait for, unless one was computed since. A timer that fires late, after
// owner computed one itself, waits out assignEvery again: the members
// deferred since are decided by the next computation, not a second one
// straight after.
func (s *sharded) assignPending() {
	live := s.live()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due = false
	if len(s.pending) == 0 || s.ctx.Err() != nil {
		return
	}
	if wait := time.Until(s.assignedAt.Add(assignEvery)); wait > 0 {
		s.dueAfterLocked(wait)
		return
	}
	if _, err := s.assignLocked(s.ctx, live, "", nil); err != nil {
		s.log.Error(err, "Could not share the members among replicas; trying again", "waiting", len(s.pending))
		s.dueAfterLocked(assignEvery)
	}
}

// assignLocked computes the assignment afresh from the registrations and
// live, with name registered by reg (or gone) whatever the cache says, and
// wakes the members it moved and those that waited for it, but name.
func (s *sharded) assignLocked(ctx context.Context, live []string, name string, reg *Registration) (*assignment, error) {
	list, err := s.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the registrations to share them among replicas: %w", err)
	}
	a := s.assigned
	next := &assignment{live: live, pins: map[string]string{}}
	for _, r := range list {
		next.pins[r.Owner.GetName()] = r.Pin
	}
	switch {
	case name == "":
	case reg != nil:
		next.pins[name] = reg.Pin // the cache may be a moment behind this reconcile
	default:
		delete(next.pins, name)
	}
	regs := make([]sharding.Registration, 0, len(next.pins))
	for member, pin := range next.pins {
		regs = append(regs, sharding.Registration{Member: member, Pin: pin})
	}
	next.owners, next.unpinned = s.shards.Assign(regs, live)
	s.assigned, s.assignedAt = next, time.Now()
	woken := s.pending
	s.pending = nil
	if a != nil {
		for member, owner := range next.owners {
			if was, ok := a.owners[member]; ok && was != owner {
				if woken == nil {
					woken = map[string]bool{}
				}
				woken[member] = true
			}
		}
	}
	delete(woken, name)
	if len(woken) > 0 {
		go s.wake(slices.Collect(maps.Keys(woken))...)
	}
	return next, nil
}

func (a *assignment) ownerOf(member string) string {
	if a == nil {
		return ""
	}
	return a.owners[member]
}
