// Package widget reconciles Widgets in every engaged member cluster.
//
// The multi-cluster controller (package reconcilers/controller), which the
// manager builds with this Reconciler, watches Sources (Widgets and their
// Deployments) on each member and feeds a single workqueue keyed by
// cluster/namespace/name. For each request the Reconciler reads the Widget and
// its Deployment from that member's cache, applies the Deployment with
// server-side apply only when the fields it owns differ from the desired ones,
// and patches the Widget's status only when the observed status differs.
// A Deployment the member refuses is reported in the Widget's Ready condition
// (reason DeploymentFailed, with the member's answer) and retried with backoff;
// what no Deployment could carry (a name longer than a label value, an image
// with whitespace) the Widget API refuses at admission.
// Besides Ready, the status carries the kstatus conditions: Reconciling
// while the Deployment is written, not yet observed by its controller or
// rolling out, Stalled (DeploymentFailed) while it is refused, past its
// progress deadline or unable to create pods; neither once it has rolled
// out. The Deployment's watch brings each next step, so none needs a requeue.
// A request for a member that is no longer engaged is dropped. The
// controller tells the engine how each reconcile ended (its
// OutcomeRecorder), and the engine judges each member's health from it: this
// package imports only the API, neither the controller, nor the engine, nor
// package clusters.
package widget
