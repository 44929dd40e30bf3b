// Package fleet starts a local fleet of real control planes, one hub and N
// members, each a kube-apiserver and etcd started by envtest from binaries
// built from source (see hack/control-plane.sh and KUBEBUILDER_ASSETS).
//
// Tests use it to exercise the operator against real API servers, and
// `make demo` uses it to give a user a fleet to look at. Members get the
// Widget CRD installed; the hub gets the hub CRDs.
package fleet
