package sharding

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Registration is what Assign needs to know of a member's registration.
type Registration struct {
	// Member is the member's name.
	Member string
	// Pin is the replica it is pinned to (registration.PinAnnotation), if any.
	Pin string
}

// Unpinned says why Assign did not follow a member's pin.
type Unpinned struct {
	// Reason is PinReplicaNotLive or PinBeyondFairShare.
	Reason string
	// Share is the pinned replica's fair share, for PinBeyondFairShare.
	Share int
}

// The reasons of Unpinned.
const (
	PinReplicaNotLive  = "PinnedReplicaNotLive"
	PinBeyondFairShare = "PinBeyondFairShare"
)

// Assign maps every member of regs to the live replica that serves it:
// rendezvous hashing with bounded loads, and returns the pins it did not
// follow. A replica's fair share is the member count divided by the
// replicas, rounded down, or up for as many replicas as the division leaves
// over. Pinned members go to their replica when it is live and, unless
// pinsBeyondShare, only up to its fair share (pinned members taken in an
// order fixed by their names' hash); the others, in that order, each go to
// the replica with the highest rendezvous weight that has fewer than its
// fair share. So every replica serves its fair share to within one (pins
// allowed beyond it aside), every replica computes the same map from the
// same inputs, and a replica joining or leaving moves little more than the
// members it gains or had. With no live replica the map is empty.
func Assign(regs []Registration, live []string, pinsBeyondShare bool) (owners map[string]string, unpinned map[string]Unpinned) {
	owners, unpinned = make(map[string]string, len(regs)), map[string]Unpinned{}
	if len(live) == 0 {
		return owners, unpinned
	}
	// Every replica may serve base members; extra of them one more.
	base, extra := len(regs)/len(live), len(regs)%len(live)
	load := make(map[string]int, len(live))
	accepts := func(replica string) bool {
		switch n := load[replica]; {
		case n < base:
			return true
		case n == base && extra > 0:
			extra--
			return true
		}
		return false
	}
	order := byHash(regs)
	var rest []ranked
	for _, m := range order {
		switch pin := m.pin; {
		case pin == "":
			rest = append(rest, m)
		case !slices.Contains(live, pin):
			unpinned[m.member] = Unpinned{Reason: PinReplicaNotLive}
			rest = append(rest, m)
		case pinsBeyondShare || accepts(pin):
			owners[m.member] = pin
			load[pin]++
		default:
			unpinned[m.member] = Unpinned{Reason: PinBeyondFairShare, Share: load[pin]}
			rest = append(rest, m)
		}
	}
	prefs := make([]ranked, len(live))
	for _, m := range rest {
		for i, replica := range live {
			prefs[i] = ranked{member: replica, key: weight(replica, m.member)}
		}
		slices.SortFunc(prefs, func(a, b ranked) int {
			return cmp.Or(cmp.Compare(b.key, a.key), cmp.Compare(a.member, b.member))
		})
		owner := prefs[0].member // when pins filled every replica
		for _, p := range prefs {
			if accepts(p.member) {
				owner = p.member
				break
			}
		}
		owners[m.member] = owner
		load[owner]++
	}
	return owners, unpinned
}

type ranked struct {
	member, pin string
	key         uint64
}

// byHash is regs in the order of their members' hash.
func byHash(regs []Registration) []ranked {
	order := make([]ranked, len(regs))
	for i, r := range regs {
		order[i] = ranked{member: r.Member, pin: r.Pin, key: weight("", r.Member)}
	}
	slices.SortFunc(order, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.member, b.member))
	})
	return order
}

// weight is the rendezvous weight of member on replica.
func weight(replica, member string) uint64 {
	h := sha256.New()
	h.Write([]byte(replica))
	h.Write([]byte{0})
	h.Write([]byte(member))
	return binary.BigEndian.Uint64(h.Sum(nil))
}
