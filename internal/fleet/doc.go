// Package fleet starts a local fleet of real control planes, one hub and N
// members, each a kube-apiserver and etcd started by envtest from binaries
// built from source (see hack/control-plane.sh and KUBEBUILDER_ASSETS).
//
// Tests use it to exercise the operator against real API servers, and
// `make demo` uses it to give a user a fleet to look at. Members get the
// Widget CRD installed; the hub gets the hub CRDs.
//
// Between the hub and a member, tests put an HTTPProxy (httpproxy.go) whose
// faults they switch at run time; with Fault.Answer it answers chosen
// requests as a hostile member would (hostile.go: a gzip bomb, an endless
// body or list, a redirect), and a Recorder stands for the host a redirect
// names.
package fleet
