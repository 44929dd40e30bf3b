// Package clusters turns a member's kubeconfig into a running, health-checkable
// controller-runtime cluster.
//
// RESTConfig parses and validates a kubeconfig: it refuses exec and
// auth-provider credentials unless allowed (a Secret must never run a program
// inside the hub), uses the current context, and sets the member's QPS and
// burst. New builds a Member from that config with its own HTTP client, so that
// stopping a member also closes its connections. Member.StartAndSync runs the member's
// cache on a context that lives as long as the member and waits, with a bound,
// for the informers the operator needs.
package clusters
