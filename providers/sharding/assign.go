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

// Assign maps every member of regs to the live replica that serves it:
// rendezvous hashing with bounded loads. Pinned members go to their replica
// when it is live. The others, taken in an order fixed by their names' hash,
// each go to the replica with the highest rendezvous weight that has fewer
// than its fair share (the member count divided by the replicas, rounded
// down, or up for as many replicas as the division leaves over). So every
// replica serves its fair share to within one (pins aside),
// every replica computes the same map from the same inputs, and a replica
// joining or leaving moves little more than the members it gains or had.
// With no live replica the map is empty.
func Assign(regs []Registration, live []string) map[string]string {
	owners := make(map[string]string, len(regs))
	if len(live) == 0 {
		return owners
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
	var rest []Registration
	for _, r := range regs {
		if r.Pin != "" && slices.Contains(live, r.Pin) {
			owners[r.Member] = r.Pin
			load[r.Pin]++
			continue
		}
		rest = append(rest, r)
	}
	type ranked struct {
		member string
		key    uint64
	}
	order := make([]ranked, len(rest))
	for i, r := range rest {
		order[i] = ranked{r.Member, weight("", r.Member)}
	}
	slices.SortFunc(order, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.member, b.member))
	})
	prefs := make([]ranked, len(live))
	for _, m := range order {
		for i, replica := range live {
			prefs[i] = ranked{replica, weight(replica, m.member)}
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
	return owners
}

// weight is the rendezvous weight of member on replica.
func weight(replica, member string) uint64 {
	h := sha256.New()
	h.Write([]byte(replica))
	h.Write([]byte{0})
	h.Write([]byte(member))
	return binary.BigEndian.Uint64(h.Sum(nil))
}
