// Package bench measures widgethub's Widget controllers on real API servers.
//
// A Tracker watches the Widgets of one member with its own informer and
// records, for every Widget, the first time its status reported each
// generation (status.observedGeneration): that is when the Widget counts as
// reconciled. Measuring from outside the manager keeps the measurement the
// same for any implementation of the controller, and the informer's watch
// adds the same small delay to each.
//
// CreateWidgets and PatchCeiling generate load with several writers;
// PatchCeiling is the API server's own write ceiling, a plain merge-patch loop
// that every controller's write rate can be compared with. ReconcilerWrites
// reads, from the API server's own metrics, how many writes a controller made
// to the objects it owns. Latencies summarises samples some of which may not
// have finished when a measurement window closed.
//
// cmd/widgethub-bench builds `make bench` from these parts; the package's own
// test asserts the fairness of the real operator wiring.
package bench
