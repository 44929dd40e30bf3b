// Package controller is widgethub's multi-cluster controller: its sources are
// engaged on each member cluster and feed one shared workqueue of
// mcreconcile.Requests (cluster/namespace/name), served by one pool of workers.
//
// # Setup
//
// New(name, mgr, Options{Reconciler, MaxConcurrentReconciles,
// MaxConcurrentReconcilesPerMember, ReconcileTimeout, Outcomes,
// LogConstructor}, sources...) builds the controller and adds it to the
// multicluster manager, which calls Engage for every member its provider
// engages. The manager (cmd/widgethub/app) builds it with widget.Reconciler
// and widget.Sources; it knows nothing of Widgets, and every line a
// reconcile logs names the request's cluster, namespace and name.
//
// # Usage
//
// Engage starts the sources on a member until the member's context ends;
// engaging the same cluster again is a no-op, and engaging another cluster
// under the same name replaces the old engagement. The queue is the fair queue
// of package fairqueue: members take turns, one member holds at most
// MaxConcurrentReconcilesPerMember workers (default three quarters, see
// PerMember), and the members that do not answer hold no more than that
// between them, however many they are (fairqueue.UnresponsiveBound): the
// controller gives the queue its number of workers for that. When members
// that went silent hold every worker, the queue takes one back for each
// member waiting with nothing in flight (fairqueue.DefaultReclaimAfter after
// the last worker was taken): each Reconcile runs under the context
// fairqueue.Queue.Context gives its request, which the queue cancels, and a
// reconcile so cut short fails with fairqueue.ErrWorkerReclaimed and is
// retried. Each Reconcile
// call has a deadline, ReconcileTimeout (DefaultReconcileTimeout, a minute),
// through controller-runtime's ReconciliationTimeout; a reconcile that runs
// past it is counted in controller_runtime_reconcile_timeouts_total. The queue
// reports its measurements as widgethub_workqueue_* metrics (metrics.go),
// among them widgethub_workqueue_unresponsive_in_flight. A failed request is
// retried after the larger of its own backoff (5ms doubling to 1000s) and its
// member's retry budget (MemberRetryRate per second, MemberRetryBurst at
// once; retry.go), so that a member failing every write spends its own budget
// of hub time, not the others'. Options.Outcomes, an OutcomeRecorder the
// controller declares, is told how each reconcile ended (the engine judges
// each member's health from it), and the error a reconcile returns, which
// may quote the member, is logged printable and bounded.
//
// # Implementation
//
// It plays the part of multicluster-runtime's controller (and uses its
// per-cluster sources and handlers, v0.24.1) with differences that matter for
// an operator whose members come and go: an engagement leaves no goroutine
// behind once its context ends (multicluster-runtime keeps one goroutine per
// source and engagement until the whole controller stops); engaging one
// member holds no lock while that member's sources start, so a slow member
// cannot delay another's engagement; and the controller builds its queue
// itself, rather than taking any queue through an option. None of its code is
// copied from upstream.
package controller
