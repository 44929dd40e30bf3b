// Package members is the multicluster provider of widgethub: it engages one
// member cluster per registration, whichever source registers it, and
// reports each member's health. The sources (package kubeconfig for
// labelled Secrets, package clusterprofile for ClusterProfiles) only say
// what is registered; everything else is done here, once, for both.
//
// # Setup
//
// New builds the Provider, which is given to mcmanager.New; Register adds a
// Source, which runs a hub-side controller on the source's objects. A
// Source turns one object into a Registration: the member's name (the
// object's), its owner (the object itself, which owns the member's
// MemberCluster and receives its Events), a hash of what the member's config
// is built from, and a function that builds that config (clusters.Config).
//
// # Implementation
//
// Each reconcile of a registration does one of:
//
//   - engage: build the config, check the member (version, the Widget API
//     served, list permission) with a short timeout, start a
//     clusters.Member whose context lives as long as the registration, wait
//     with a bound for its informers, and engage it with the multicluster
//     manager, whose single fair queue then carries its Widget requests;
//   - probe: check an engaged member; after several failures in a row park it
//     (its caches stop) and report it Unreachable, and when it answers again
//     engage it afresh so that its caches relist;
//   - disengage: a deleted registration or a changed hash stops the member's
//     cache and every source engaged on it, and removes its metric series
//     and, when the registration is gone, its MemberCluster.
//
// What it sees is written to the MemberCluster of the same name: Ready, and
// the kstatus conditions Reconciling (Engaging while a new registration is
// engaged, Unreachable while the member does not answer) or Stalled (a
// registration only a user can fix). It is recorded as an Event on the
// registering object when readiness changes, and exported as per-member
// metrics. Failures are retried with backoff by the source's controller;
// reconciles of different registrations run concurrently, and those that
// hang hold a bounded share of the workers (see Workers).
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
//     without one coming free, the reconcile held longest is cut short. Its member checks, cache sync and
//     probes run under the queue's context (fairqueue.Queue.Context), so it
//     returns at once: an engagement stops the member it started (closing its
//     connections, so that a request without that deadline, discovery say,
//     fails too) and engages nothing; a probe counts as failed, so that a
//     member whose probes are always cut short is still parked after
//     FailureThreshold of them. What it writes on the hub (fences, the
//     MemberCluster, Events) runs under the controller's context, so the
//     outcome is recorded; the reconcile then fails with
//     fairqueue.ErrWorkerReclaimed and is retried with backoff.
//   - The bound of the unresponsive: a registration whose last reconcile was
//     cut short, or held its worker fairqueue.DefaultStallAfter (5s) or
//     more, gets a worker only while fewer than half the workers are busy
//     (registrationsInFlightBound), until one of its reconciles ends in time.
//
// So a new registration, a healthy member's probe or a member taken over
// from a dead replica waits about a second for a worker (a round of
// reclaiming; two when other registrations became ready just before it),
// however many registrations hang. This is the fair queue's design reused rather than a
// pool of its own: the same guarantee (a quiet member is served within
// ReclaimAfter whatever the others hold) with the queue's tested code; a
// separate pool for engagements would not keep probes of members that go
// silent together from holding the rest. Not cut short, and held to their
// own bounds: a hand-over's drain (cutting it would let two replicas write
// to the member together sooner than DrainTimeout allows), a renewal's
// TokenRequest (at most one per half-life) and the discovery of a parked
// member's probe (the member request timeout). The price: an engagement
// that takes 5s or more (a large member's cache) counts as hanging until a
// reconcile of it ends in time, and a slow check cut short for another
// registration is retried. controller-runtime v0.24.1's priority queue,
// which can deadlock on shutdown, is not used; the fair queue's ShutDown
// only wakes the workers waiting in Get.
//
// # Names claimed twice
//
// Member names are one namespace for all sources (they key the shared
// queue). A name claimed by registrations of two sources is kept by the
// source registered first (the operator registers kubeconfig Secrets
// first): the other registration engages nothing and gets a Warning Event
// with reason NameConflict; the holder's MemberCluster shows the condition
// NameConflict. When the holder goes, the waiting registration is woken and
// takes the name; a registration of the first source takes a name from one
// of a later source at once (that member stops, its MemberCluster goes).
//
// # Token renewal
//
// A source may mark a registration's token renewable (Registration.Renewal:
// the Secrets kubectl widgethub join wrote). Once less than
// RenewalOptions.Remaining of the token's lifetime is left, the replica that
// serves the member asks the member, with that token, for a new one of the
// same ServiceAccount, bound to the same Secret, with the same lifetime; the
// source writes it into the registration, and the next reconcile swaps it
// into the engaged member without a relist (renew.go). The schedule is the
// hub's: from its record of when it asked for the token and for how long
// (TokenIssue), never from the token's claims, and at most one renewal per
// RenewalOptions.MinInterval; claims that do not fit are reported (reason
// ImplausibleToken). A renewal that fails
// is retried with backoff and shown by the CredentialsExpiring condition, a
// Warning Event and metrics; the member keeps its current token until it
// expires.
//
// # Sharding
//
// With Options.Sharding, several replicas of the manager share the members
// (see package sharding): each reconcile first asks which live replica owns
// the member. A replica that does not own it hands it over if it serves it
// (drains it, then releases its fence) and does nothing else; the owner takes
// the member's fence before it engages it, and writes the MemberCluster with
// status.servedBy. A change of the live replicas, a released fence, or a new
// assignment that moves a member wakes the registrations concerned. A
// sharded Provider takes one source only, over whose registrations the
// assignment is computed: the operator refuses ClusterProfiles with
// --sharding.
package members
