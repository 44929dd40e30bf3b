// Package kubeconfig is the multicluster provider that discovers member
// clusters from kubeconfig Secrets on the hub and reports their health.
//
// A Secret in the registration namespace labelled widgethub.io/kubeconfig=true
// registers one member, named after the Secret, with the kubeconfig in its
// "kubeconfig" key. The Provider runs a hub-side controller on those Secrets
// only (the hub cache is scoped to that namespace and label, see
// SecretCacheOptions). Each reconcile of a Secret does one of:
//
//   - engage: validate the kubeconfig, check the member (version, the Widget
//     API served, list permission) with a short timeout, start a
//     clusters.Member whose context lives as long as the registration, wait
//     with a bound for its informers, and engage it with the multicluster
//     manager;
//   - probe: ask an engaged member for /version; after several failures in a
//     row report it Unreachable, and when it answers again engage it afresh
//     so that its caches relist;
//   - disengage: a deleted Secret or a changed kubeconfig stops the member's
//     cache and every source engaged on it.
//
// What it sees is written to the MemberCluster of the same name (owned by the
// Secret): Ready, and the kstatus conditions Reconciling (Engaging while a
// new kubeconfig is engaged, Unreachable while the member does not answer) or
// Stalled (a registration only a user can fix). It is recorded as an Event on
// the Secret when readiness changes, and exported as per-member metrics. Failures are retried with backoff by the
// controller's queue; reconciles of different Secrets run concurrently, so a
// slow member never holds up another.
//
// With Options.Sharding, several replicas of the manager share the members
// (see package sharding): each reconcile first asks which live replica owns
// the member. A replica that does not own it hands it over if it serves it
// (drains it, then releases its fence) and does nothing else; the owner takes
// the member's fence before it engages it, and writes the MemberCluster with
// status.servedBy. A change of the live replicas, a released fence, or a new
// assignment that moves a member wakes the registrations concerned.
package kubeconfig
