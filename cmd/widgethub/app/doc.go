// Package app is the hub manager's wiring, kept apart from its main so that
// tests, the demo and the bench run exactly what the binary runs: the
// multicluster manager with its health checks, metrics and leader election,
// the kubeconfig provider, and the Widget controller. cmd/widgethub parses
// flags into Options (BindFlags) and calls New; Start runs the same manager
// in the background for in-process users.
//
// Its tests are the operator's end-to-end tests on real API servers: a hub and
// several members (internal/fleet), the real manager, faults injected from
// outside (a TCP proxy, admission webhooks, RBAC and CRD changes).
package app
