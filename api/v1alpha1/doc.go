// Package v1alpha1 holds the widgethub.io/v1alpha1 API: Widget (in members)
// and MemberCluster (on the hub).
//
// A Widget lives in a member cluster: widgethub turns its spec.replicas into a
// Deployment there and writes back status.availableReplicas and a Ready
// condition. The condition types and reasons that clients may rely on are
// declared here as constants.
//
// +kubebuilder:object:generate=true
// +groupName=widgethub.io
package v1alpha1
