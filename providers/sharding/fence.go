package sharding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FenceName is the name of member's fence Lease: "widgethub-member-" and the
// member's name when that is a legal name (a member name of up to 236
// characters), else "widgethub-fence-" and the hex SHA-256 of the name. No
// two member names share a fence: the first form is one-to-one, the second
// cannot be taken for the first (its prefix differs), and the digest tells
// long names apart. Acquire checks the member named in the Lease besides.
func FenceName(member string) string {
	const prefix = "widgethub-member-"
	if len(prefix)+len(member) <= 253 {
		return prefix + member
	}
	sum := sha256.Sum256([]byte(member))
	return "widgethub-fence-" + hex.EncodeToString(sum[:])
}

// ErrFenceOfAnotherMember: the Lease named after a member's fence names
// another member (ClusterAnnotation); it is neither taken nor released.
var ErrFenceOfAnotherMember = errors.New("the fence Lease names another member")

// fenceOf checks that lease is the fence of member.
func fenceOf(lease *coordinationv1.Lease, member string) error {
	if got := lease.Annotations[ClusterAnnotation]; got != member {
		return fmt.Errorf("fence Lease %s: %w (%s=%.64q)", lease.Name, ErrFenceOfAnotherMember, ClusterAnnotation, got)
	}
	return nil
}

// Holds tells whether this replica holds member's fence in its current term.
func (s *Shards) Holds(member string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[member]
	return ok && h.term != 0 && h.term == s.termLocked(time.Now())
}

// Acquire takes member's fence for this replica and returns the term it
// holds it in (pass it to Gate). The fence is taken when it does not exist,
// is free, is this replica's, or is held by a replica whose heartbeat, read
// from the API server, has expired or is gone;
// otherwise Acquire returns a *HeldError and the holder must release it
// first. owner, a reference to the object that registers member, owns the
// fence, so that the fence goes with it; a fence owned by an earlier object
// of that name (deleted and created again) is given to owner, else the
// garbage collector would delete it under the member's replica. A fence
// held in this term that is gone from the reader (deleted by hand, or by a
// garbage collector that read its earlier owner) or no longer this
// replica's is taken again; otherwise Acquire makes no request but to the
// reader.
func (s *Shards) Acquire(ctx context.Context, member string, owner metav1.OwnerReference) (uint64, error) {
	s.mu.Lock()
	term := s.termLocked(time.Now())
	h := s.held[member]
	heldNow := term != 0 && h.term == term && h.owner == owner.UID
	s.mu.Unlock()
	if term == 0 {
		return 0, ErrNotServing
	}
	if heldNow && s.stands(ctx, member, owner.UID) {
		return term, nil
	}
	// A hub that does not answer must not hold the caller: a fence taken
	// later than a lease duration is no use.
	ctx, cancel := context.WithTimeout(ctx, s.opts.LeaseDuration)
	defer cancel()

	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{}
	key := s.fenceKey(member)
	err := s.api.Get(ctx, key, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels:          map[string]string{LeaseLabel: roleMember},
			Annotations:     map[string]string{ClusterAnnotation: member},
			OwnerReferences: []metav1.OwnerReference{owner},
		}}
		s.take(lease, now)
		if err := s.writer.Create(ctx, lease); err != nil {
			return 0, fmt.Errorf("create fence Lease %s: %w", key.Name, err)
		}
	case err != nil:
		return 0, fmt.Errorf("get fence Lease %s: %w", key.Name, err)
	default:
		if err := fenceOf(lease, member); err != nil {
			return 0, err
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		if holder != "" && holder != s.opts.ReplicaID {
			expired, err := s.holderExpired(ctx, holder)
			if err != nil {
				return 0, err
			}
			if !expired {
				return 0, &HeldError{Holder: holder}
			}
		}
		if holder != s.opts.ReplicaID {
			s.log.Info("Taking over a member's fence", "cluster", member, "from", holder,
				"transitions", ptr.Deref(lease.Spec.LeaseTransitions, 0))
		}
		// Held in this term and found as it was taken: only the reader
		// lagged behind this replica's own write. A fence that lost its
		// label is out of the reader's sight for good: it gets it back.
		if !heldNow || !s.takenFor(lease, owner.UID) {
			s.take(lease, now)
			if !ownedBy(lease, owner.UID) {
				lease.OwnerReferences = []metav1.OwnerReference{owner}
			}
			if lease.Labels[LeaseLabel] != roleMember {
				if lease.Labels == nil {
					lease.Labels = map[string]string{}
				}
				lease.Labels[LeaseLabel] = roleMember
			}
			// A compare-and-swap: it fails if anyone wrote the fence since the Get.
			if err := s.writer.Update(ctx, lease); err != nil {
				return 0, fmt.Errorf("take fence Lease %s: %w", key.Name, err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.termLocked(time.Now()) != term {
		// The term ran out while the fence was being taken: it is ours on
		// the hub, but it takes a new term to serve again.
		return 0, ErrNotServing
	}
	s.held[member] = heldFence{term: term, owner: owner.UID}
	return term, nil
}

// stands tells whether the reader shows member's fence taken for owner.
func (s *Shards) stands(ctx context.Context, member string, owner types.UID) bool {
	lease := &coordinationv1.Lease{}
	if err := s.reader.Get(ctx, s.fenceKey(member), lease); err != nil || fenceOf(lease, member) != nil {
		return false
	}
	return s.takenFor(lease, owner)
}

// takenFor tells whether lease is as this replica takes a fence for owner:
// held by this replica, owned by owner and labelled (a cache of
// LeaseSelector sees no other).
func (s *Shards) takenFor(lease *coordinationv1.Lease, owner types.UID) bool {
	return ptr.Deref(lease.Spec.HolderIdentity, "") == s.opts.ReplicaID && ownedBy(lease, owner) &&
		lease.Labels[LeaseLabel] == roleMember
}

// fenceKey is the key of member's fence Lease.
func (s *Shards) fenceKey(member string) client.ObjectKey {
	return client.ObjectKey{Namespace: s.opts.Namespace, Name: FenceName(member)}
}

// ownedBy tells whether uid is among lease's owners.
func ownedBy(lease *coordinationv1.Lease, uid types.UID) bool {
	return slices.ContainsFunc(lease.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

func (s *Shards) take(lease *coordinationv1.Lease, now metav1.MicroTime) {
	if ptr.Deref(lease.Spec.HolderIdentity, "") != s.opts.ReplicaID {
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		lease.Spec.AcquireTime = &now
	}
	lease.Spec.HolderIdentity = ptr.To(s.opts.ReplicaID)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(s.opts.LeaseDuration / time.Second))
	lease.Spec.RenewTime = &now
}

// Release frees member's fence if this replica holds it on the hub, so that
// its next owner may take it at once. Call it only after the member is
// drained. With remove, the fence is deleted instead (the registration is gone).
func (s *Shards) Release(ctx context.Context, member string, remove bool) error {
	s.mu.Lock()
	_, held := s.held[member]
	delete(s.held, member)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.opts.LeaseDuration)
	defer cancel()
	lease := &coordinationv1.Lease{}
	key := s.fenceKey(member)
	if !held && !remove {
		// Not held in this process: only a fence left in this replica's
		// name (by an earlier process with its id) needs the API server.
		if err := s.reader.Get(ctx, key, lease); err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != s.opts.ReplicaID {
			return client.IgnoreNotFound(err)
		}
	}
	if err := s.api.Get(ctx, key, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := fenceOf(lease, member); err != nil {
		return err
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != s.opts.ReplicaID && !(remove && holder == "") {
		return nil
	}
	if remove {
		err := s.writer.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		return client.IgnoreNotFound(err)
	}
	lease.Spec.HolderIdentity = ptr.To("")
	if err := s.writer.Update(ctx, lease); err != nil {
		return fmt.Errorf("release fence Lease %s: %w", key.Name, err)
	}
	return nil
}

// HeldMembers are the members whose fences this replica holds or held in
// an earlier term without releasing them.
func (s *Shards) HeldMembers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.held))
}
