// Package plugin implements the kubectl plugin `kubectl widgethub`: it joins
// member clusters to a widgethub hub and shows the fleet.
//
//   - join NAME installs the Widget CRD in the member, creates a ServiceAccount
//     and the least-privilege ClusterRole the hub needs there (the generated
//     config/member-rbac role plus read access to discovery), fenced by a
//     ValidatingAdmissionPolicy (config/member-rbac) so that it writes only
//     Deployments of the Widget reconciler's shape, mints a token for it with the TokenRequest API,
//     bound to a Secret of this registration's own (token.go), and registers
//     a kubeconfig built from that token and the member's CA as a labelled
//     Secret on the hub.
//   - unjoin NAME revokes the registration's token (it deletes the Secret
//     the token is bound to), deletes the registration Secret and, with
//     --cleanup, what join created in the member (the CRD and the Widgets
//     stay) once no other registration uses it (cleanup.go).
//   - clusters lists the registrations (Secrets, and the ClusterProfiles the
//     hub's MemberClusters name) with the hub's MemberCluster status and when
//     each token expires.
//   - widgets lists the Widgets of every member in one table with a CLUSTER
//     column, reading each member as the hub does: through its registration
//     kubeconfig, or for a ClusterProfile's member through the exec plugin of
//     the hub's access provider file (--clusterprofile-provider-file,
//     connect.ProfileConfig; profile.go); without that file such a member
//     is reported, not read.
//   - clusters and widgets print a table, -o wide with more columns, or -o
//     json|yaml a kubectl List (output.go): the MemberClusters, or the
//     Widgets each with a field "cluster" naming its member, which the
//     Widget API does not have. Whatever the format, text the plugin did not
//     choose is printable and bounded (a cell 253 bytes, a List string 4 KiB,
//     an error 4 KiB).
//   - completion bash|zsh|fish prints cobra's completion script for the
//     kubectl-widgethub executable (completion.go).
//
// Run is the whole program; cmd/kubectl-widgethub only calls it and exits
// with its code, so tests and the demo drive the same code in-process (the
// exit codes are tested on the built binary too). Errors carry an exit code
// (see the Exit constants, and docs/plugin.md) and never contain tokens or
// kubeconfig content. The plugin links no part of the hub's engine
// (hack/verify-plugin-deps.sh): it shares with the hub the registration
// contract, the API types, the member manifests and the checks of a
// kubeconfig (package clusters/connect); not the hub's per-member type. It
// reads and writes through kube (kube.go), a small client over client-go's
// dynamic client for the API groups of its own scheme, not through
// controller-runtime's client or a typed clientset, which would link every
// API group of k8s.io/api.
package plugin
