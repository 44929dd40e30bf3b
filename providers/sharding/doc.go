// Package sharding shares the members of one hub among several replicas of
// the manager, through Leases on the hub's API server: no other datastore and
// no consensus of its own.
//
// # Membership
//
// Every replica renews a heartbeat Lease of its own (named after its replica
// id, labelled widgethub.io/lease=replica) in the registration namespace. A
// replica counts another as live while it sees that Lease change within its
// leaseDurationSeconds, measured on its own clock from the moment it saw the
// change (as client-go's leader election does), so clock skew between
// replicas does not matter. Liveness is read from the API server, never from
// the hub cache, which after a partition still holds the Leases from before
// it and would make every other replica look expired. A replica that stops cleanly deletes its Lease
// once it has handed its members over, and the others take them at once.
//
// # Assignment
//
// Owner picks the replica of a member from the live replicas by rendezvous
// (highest random weight) hashing: every replica computes the same owner
// without talking to the others, and a replica joining or leaving moves only
// the members it gains or had, about 1/N of them. A registration may pin its
// member to a replica with the widgethub.io/replica annotation; a pin is
// followed while the replica is live and within its fair share (unless
// Options.AllowPinsBeyondFairShare), and Assign returns the pins it did not
// follow.
//
// # Fenced hand-over
//
// A member changes hands only through its fence: a Lease per member
// (labelled widgethub.io/lease=member, FenceName: one per legal member name,
// annotated with the member's name, which Acquire checks) whose holderIdentity is the replica
// serving it and whose leaseTransitions counts the hand-overs. Acquire takes
// a fence only when it is free, held by this replica, or held by a replica
// whose heartbeat it has just read from the API server and seen expired or
// gone; every write is a compare-and-swap on the Lease's
// resourceVersion. The owner that loses a member drains it first (refuses its
// new requests, waits for those in flight, stops its caches and probes) and
// then Releases the fence, which wakes the new owner.
//
// A replica's right to serve lasts until RenewDeadline after its last
// successful heartbeat began, shorter than the LeaseDuration after which the
// others may take its members. Gate, checked before every request to a
// member, refuses once that right has lapsed, and for good: a replica that
// was stopped (SIGSTOP, a long pause) and renews again afterwards starts a new
// term, and the members of the old term must be drained and their fences
// acquired again before anything is sent to them.
package sharding
