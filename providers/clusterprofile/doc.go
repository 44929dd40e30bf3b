// Package clusterprofile is the registration source of ClusterProfiles
// (multicluster.x-k8s.io/v1alpha1, SIG-Multicluster's Cluster Inventory API,
// KEP-4322): each ClusterProfile of one hub namespace registers the member
// named after it.
//
// # Security model
//
// A ClusterProfile holds no credentials. Its status lists access providers,
// each a name and the cluster to reach (server, CA data, extensions); the
// hub's administrator configures, in a provider file mounted on the hub
// (--clusterprofile-provider-file, the JSON of cluster-inventory-api's
// pkg/access), which exec plugin gets the credentials of each provider name.
// The member is reached through the first provider of that file that the
// profile names too; a profile naming none of them is reported
// (NoAccessProvider) and nothing is run.
//
// What the hub runs is the file's, never the profile's: LoadProviderFile
// refuses the policies that would let a profile's extensions add arguments
// or environment variables to the command, and the profile's cluster may not
// name a CA file or a proxy, nor skip TLS verification without
// --allow-insecure-members (UnsafeKubeconfig). The server it names is
// treated as a kubeconfig's server: https:// only, and the destination
// checks of package clusters apply when the member is dialled. The
// cluster's "client.authentication.k8s.io/exec" extension reaches the
// plugin as data (in KUBERNETES_EXEC_INFO) only when the file sets
// provideClusterInfo; the plugin must treat it, and the server it is told,
// as the profile's words (cmd/widgethub-credential binds each token to its
// server).
//
// # Status
//
// A ClusterProfile's member is reported like a Secret's: in a MemberCluster
// of the same name and namespace, owned by the ClusterProfile, with the same
// conditions, Events (on the ClusterProfile) and metrics; the profile's own
// status is the cluster manager's and is not written. See package members
// for engagement and for a name that a Secret registers too (the Secret keeps
// it).
package clusterprofile
