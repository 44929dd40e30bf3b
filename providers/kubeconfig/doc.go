// Package kubeconfig is the multicluster provider that discovers member
// clusters from kubeconfig Secrets on the hub.
//
// A Secret in the registration namespace labelled widgethub.io/kubeconfig=true
// registers one member, named after the Secret, with the kubeconfig in its
// "kubeconfig" key. The Provider runs a hub-side controller on those Secrets
// only (the hub cache is scoped to that namespace and label, see
// SecretCacheOptions). For each Secret it validates the kubeconfig, starts a
// clusters.Member whose context lives as long as the registration, waits with a
// bound for the member's informers, and engages it with the multicluster
// manager. A changed kubeconfig re-engages the member; a deleted Secret stops
// the member's cache and every source engaged on it.
package kubeconfig
