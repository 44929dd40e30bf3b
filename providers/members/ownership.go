package members

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// ownership decides which registered members this replica serves: the seam
// between the engine and sharding. everything serves them all; sharded
// (sharded.go) shares them with the other replicas through Leases. Nothing
// else in the engine asks whether the hub is sharded.
type ownership interface {
	// start takes part in the hub until ctx ends and returns once this
	// replica may serve. wake asks for the registrations of the named
	// members, or of all members when none is named, to be reconciled
	// again: their owner may have changed.
	start(ctx context.Context, wake func(names ...string)) error
	// serve tells whether this replica serves the member of reg, called
	// name, and if it does, in which term (its fence taken).
	serve(ctx context.Context, name string, reg *Registration) (serving, error)
	// gate is the check before every request to a member served in term;
	// nil for none.
	gate(term uint64) func() error
	// release gives the member up once it is drained, so that its next
	// replica may take it at once; gone tells that its registration is gone.
	release(ctx context.Context, name string, gone bool) error
	// cleans tells whether this replica removes the MemberCluster of a gone
	// registration, whose status says servedBy; it is asked on every
	// replica, with or without that MemberCluster, as the members are
	// shared out again without the gone one.
	cleans(ctx context.Context, name, servedBy string) (bool, error)
	// report shows in a member's status who serves it and how its pin is
	// followed.
	report(status *v1alpha1.MemberClusterStatus, name string)
	// served is told how many members this replica serves, at each change.
	served(n int)
	// drainTimeout bounds the drain of each member when the provider stops
	// (zero: members are stopped at once, nobody takes them over meanwhile).
	drainTimeout() time.Duration
	// stop leaves the hub once every member is drained: released fences, a
	// retired heartbeat.
	stop(ctx context.Context)
}

// serving is the answer of ownership.serve.
type serving struct {
	// here: this replica serves the member, in term.
	here bool
	term uint64
	// owner is the replica that serves it when not here (empty when unknown).
	owner string
	// result is how the reconcile ends when not here (a look again later).
	result reconcile.Result
}

// everything is the ownership of a hub that is not sharded: its one active
// replica (the leader) serves every member, in no term, and stops them at
// once when it stops.
type everything struct{}

var _ ownership = everything{}

func (everything) start(context.Context, func(...string)) error { return nil }

func (everything) serve(context.Context, string, *Registration) (serving, error) {
	return serving{here: true}, nil
}

func (everything) gate(uint64) func() error                             { return nil }
func (everything) release(context.Context, string, bool) error          { return nil }
func (everything) cleans(context.Context, string, string) (bool, error) { return true, nil }
func (everything) drainTimeout() time.Duration                          { return 0 }
func (everything) stop(context.Context)                                 {}
func (everything) served(int)                                           {}

func (everything) report(status *v1alpha1.MemberClusterStatus, _ string) {
	status.ServedBy = ""
	meta.RemoveStatusCondition(&status.Conditions, v1alpha1.MemberPinned)
}
