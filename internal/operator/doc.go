// Package operator wires the hub manager: the multicluster manager with its
// health checks, metrics and leader election, the kubeconfig provider, and the
// Widget controller. cmd/widgethub parses flags into Options and calls New;
// tests call New with the same Options, so they exercise the real wiring.
package operator
