// Package demo runs `make demo`: a hub and two members (alpha and beta) as
// local control planes (internal/fleet), the hub manager in-process
// (internal/operator), both members joined with the kubectl plugin's own code
// (internal/plugin), the sample Widgets of config/samples applied to both, and
// a stand-in for the Deployment controller, which local control planes do not
// run, so that the Widgets become Ready. It prints what it does, then the
// plugin's view of the fleet and the kubeconfig files to explore it with, and
// keeps the fleet up until its context ends, or stops once the Widgets are
// Ready when asked to (for tests and CI).
package demo
