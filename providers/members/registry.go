package members

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// registry is the engine's one table: which registration holds each member
// name, and the members this replica serves. Member names are one namespace
// for every source (they key the shared queue): a name claimed by
// registrations of two sources is held by the source registered first; the
// other waits as the name's loser.
type registry struct {
	mu sync.RWMutex
	// claims is the registration that holds each name, losers one that
	// claims it too and waits for it.
	claims map[multicluster.ClusterName]claim
	losers map[multicluster.ClusterName]claim
	// members are the members this replica serves: engaged, parked, or
	// being engaged.
	members map[multicluster.ClusterName]*member
	// closing is set when the provider stops: nothing is served any more.
	closing bool
	// served, when set, is told how many members are served after each
	// change of them.
	served func(n int)
}

func newRegistry() *registry {
	return &registry{
		claims:  map[multicluster.ClusterName]claim{},
		losers:  map[multicluster.ClusterName]claim{},
		members: map[multicluster.ClusterName]*member{},
	}
}

// changedLocked tells served how many members are served now.
func (r *registry) changedLocked() {
	if r.served != nil {
		r.served(len(r.members))
	}
}

// claim is one registration of a member name.
type claim struct {
	source *sourceController
	key    types.NamespacedName
}

func (c claim) String() string { return c.source.Kind() + " " + c.key.String() }

// claimed is what claim found.
type claimed struct {
	// held: the registration holds the name; else holder does.
	held   bool
	holder claim
	// waits: the registration has just begun to wait for the name.
	waits bool
	// displaced is the registration of a later source that held the name
	// until now, if any.
	displaced *claim
}

// claim makes me hold name unless a registration of an earlier (or the
// same) source holds it: then me waits as the name's loser. A registration
// of a later source that held the name loses it to me.
func (r *registry) claim(name multicluster.ClusterName, me claim) claimed {
	r.mu.Lock()
	defer r.mu.Unlock()
	holder, held := r.claims[name]
	switch {
	case !held || holder == me:
		r.claims[name] = me
		if r.losers[name] == me {
			delete(r.losers, name)
		}
		return claimed{held: true}
	case holder.source.index <= me.source.index:
		loser, known := r.losers[name]
		r.losers[name] = me
		return claimed{holder: holder, waits: !known || loser != me}
	}
	r.claims[name] = me
	return claimed{held: true, displaced: &holder}
}

// unclaim forgets me, whose registration is gone, and tells whether me held
// the name (also when nothing held it: a registration seen for the first
// time after a restart holds no claim yet) and which registration to wake:
// the loser that now takes the name, or the holder that stops showing the
// conflict.
func (r *registry) unclaim(name multicluster.ClusterName, me claim) (mine bool, wake *claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	holder, held := r.claims[name]
	loser, waits := r.losers[name]
	mine = held && holder == me
	switch {
	case mine:
		delete(r.claims, name)
		delete(r.losers, name)
		if waits {
			wake = &loser
		}
	case waits && loser == me:
		delete(r.losers, name)
		wake = &holder
	}
	return mine || !held, wake
}

// conflict is the registration that claims name but waits for it, if any.
func (r *registry) conflict(name multicluster.ClusterName) (claim, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.losers[name]
	return c, ok
}

// holders are the registrations that hold names, or every name when none
// is given.
func (r *registry) holders(names ...string) []claim {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(names) == 0 {
		all := make([]claim, 0, len(r.claims))
		for _, c := range r.claims {
			all = append(all, c)
		}
		return all
	}
	var some []claim
	for _, name := range names {
		if c, ok := r.claims[multicluster.ClusterName(name)]; ok {
			some = append(some, c)
		}
	}
	return some
}

// serve returns the member called name that this replica serves for me,
// made by newMember when there is none yet, or nil when me does not hold
// the name. Claims and members change under one lock: a registration that
// lost the name while its reconcile was on its way makes no member (one
// made before is stopped by the registration that took the name).
func (r *registry) serve(name multicluster.ClusterName, me claim, newMember func() *member) (*member, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return nil, errors.New("the hub replica is stopping")
	}
	if r.claims[name] != me {
		return nil, nil
	}
	m, ok := r.members[name]
	if !ok {
		m = newMember()
		r.members[name] = m
		r.changedLocked()
	}
	return m, nil
}

// member is the member called name that this replica serves, or nil.
func (r *registry) member(name multicluster.ClusterName) *member {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.members[name]
}

// each returns the members this replica serves.
func (r *registry) each() []*member {
	r.mu.RLock()
	defer r.mu.RUnlock()
	all := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		all = append(all, m)
	}
	return all
}

// remove stops serving the member called name and returns it, nil when it
// was not served.
func (r *registry) remove(name multicluster.ClusterName) *member {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.members[name]
	if ok {
		delete(r.members, name)
		r.changedLocked()
	}
	return m
}

// close stops serving every member, for a provider that stops, and returns
// them.
func (r *registry) close() []*member {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closing = true
	all := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		all = append(all, m)
	}
	r.members = map[multicluster.ClusterName]*member{}
	r.changedLocked()
	return all
}
