// Package members is the engine of widgethub: the multicluster provider
// that engages one member cluster per registration, whichever source
// registers it, and reports each member's health. The sources (package
// kubeconfig for labelled Secrets, package clusterprofile for
// ClusterProfiles) only say what is registered and how to reach it;
// everything else is done here, once, for both.
//
// # Setup
//
// New builds the Provider from Options, which is given to mcmanager.New;
// Register adds a Source, whose controller then reconciles the source's
// objects on the hub. CacheOptions and CacheObjects scope the hub cache to
// what the engine and the sources read. Options.Sharding chooses the
// ownership (below). The Provider is the Widget controller's
// controller.OutcomeRecorder: RecordOutcome feeds the Degraded verdict.
//
// # Usage
//
// A Source turns one object into a Registration: the member's name (the
// object's), its owner (the object itself, which owns the member's
// MemberCluster and receives its Events), a hash of what its config is
// built from, its pin, and whether its token is renewed. Source.Config
// builds the member's config when it is engaged afresh; a TokenWriter
// writes a renewed token back. Get serves the engaged members to the
// multicluster manager.
//
// # Implementation
//
// Four parts, each in its own file:
//
//   - The registry (registry.go): which registration holds each member
//     name, and the members this replica serves. Member names are one
//     namespace for every source (they key the shared queue): a name
//     claimed by registrations of two sources is held by the source
//     registered first (the operator registers kubeconfig Secrets first);
//     the other engages nothing, gets a Warning Event with reason
//     NameConflict, and takes the name when the holder goes; the holder's
//     MemberCluster shows the condition NameConflict. The rule depends on
//     the sources only, so every replica resolves a name alike.
//   - The ownership (ownership.go): which members this replica serves.
//     everything serves all of them (one active replica, the leader);
//     sharded (sharded.go) shares the members of every source among the
//     live replicas through Leases (package sharding): rendezvous hashing
//     over the registrations, a fence per member taken before it is
//     engaged, a gate on every request that refuses once the replica's
//     term lapsed, a drain and a released fence when it moves. Nothing
//     else asks whether the hub is sharded.
//   - The member (member.go): one member's whole life on this replica and
//     its state (idle, engaged, parked), behind the connection interface
//     that clusters.Member implements. Its transitions are those of
//     docs/member-health.md: engage (check, start the caches with a bound,
//     engage with the multicluster manager), probe (the same checks; after
//     FailureThreshold failures in a row, or past MaxObjects, park: caches
//     stopped, connections closed, only probed), unpark (engaged afresh
//     once a probe passes), swap a bearer token in place, renew the token
//     (renew.go, on the hub's clock, never the member's word), drain and
//     leave.
//   - The story (reconcile.go): each reconcile of a registration reads it;
//     if it is gone, lets its member go (stopped, fence and metrics
//     removed, MemberCluster deleted); else holds its name, asks the
//     ownership whether this replica serves the member (handing it over if
//     not), takes the member one step, renews its token when due, and
//     writes what was seen into the MemberCluster (status.go): Ready, the
//     kstatus conditions Reconciling or Stalled, CredentialsExpiring,
//     Pinned and servedBy, an Event on the registering object when
//     readiness changes, and the per-member metrics (metrics.go). The
//     status is written onto the version it was computed from, never over
//     newer conditions: when the read was behind, it is computed again from
//     the API server's copy, or, if another registration of the name took
//     the MemberCluster over meanwhile, the reconcile fails and is retried.
//
// # Workers
//
// Each source's controller has Options.ConcurrentEngagements workers, and
// every engagement, probe, parking, renewal and hand-over is a reconcile of
// it, so registrations whose member hangs (checks bounded by ProbeTimeout
// each, a cache sync by SyncTimeout, a drain by DrainTimeout) could hold
// all of them and delay every other registration. The controller's queue is
// therefore the shared fair queue (reconcilers/controller/fairqueue), each
// registration its own member (workers.go), with its rules:
//
//   - Reclaiming: while a registration with nothing in flight whose last
//     reconcile was answered waits, and every worker has been busy for a
//     second (registrationReclaimAfter; the Widget queue's 100ms would cut
//     healthy engagements when many registrations become ready at once)
//     without one coming free, the reconcile held longest is cut short. Its
//     member checks, cache sync and probes run under the queue's context
//     (fairqueue.Queue.Context), so it returns at once: an engagement stops
//     the connection it started and engages nothing; a probe counts as
//     failed, so that a member whose probes are always cut short is still
//     parked after FailureThreshold of them. What it writes on the hub
//     (fences, the MemberCluster, Events) runs under the controller's
//     context, so the outcome is recorded; the reconcile then fails with
//     fairqueue.ErrWorkerReclaimed and is retried with backoff.
//   - Cutting short the gone: a registration deleted, being deleted or no
//     longer a registration has its reconcile in flight cut short the same
//     way at once (workers.go's cutGone), without counting as hanging, and
//     is reconciled again to let its member go; its worker does not wait
//     for a reclaim or the sync timeout.
//   - The bound of the unresponsive: a registration whose last reconcile was
//     cut short, or held its worker fairqueue.DefaultStallAfter (5s) or
//     more, gets a worker only while such registrations hold fewer than
//     half the workers (registrationsInFlightBound), until one of its
//     reconciles ends in time. A reconcile in flight for less than that
//     does not count (fairqueue.Options.OneKeyPerMember): when a dead
//     replica's members are taken over, one engagement cut short is
//     retried after its backoff, not after every other has ended
//     (docs/sharding.md measures both).
//
// So a new registration, a healthy member's probe or a member taken over
// from a dead replica waits about a second for a worker, however many
// registrations are known to hang. Registrations not tried yet look alike and
// are served in arrival order: one that arrives behind N new ones that hang
// waits about a second per Options.ConcurrentEngagements of them, until each
// has been cut short once. Not cut short, and held to their own bounds: a
// hand-over's drain (cutting it would let two replicas write to the member
// together sooner than DrainTimeout allows), a renewal's TokenRequest (at
// most one per half-life) and the discovery of a parked member's probe (the
// member request timeout). controller-runtime v0.24.1's priority queue,
// which can deadlock on shutdown, is not used; the fair queue's ShutDown
// only wakes the workers waiting in Get.
package members
