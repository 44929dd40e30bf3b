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
//   - clusters lists the registrations with the hub's MemberCluster status
//     and when each token expires.
//   - widgets lists the Widgets of every member, reading each member through
//     its registration kubeconfig, in one table with a CLUSTER column.
//   - completion bash|zsh|fish prints cobra's completion script for the
//     kubectl-widgethub executable (completion.go).
//
// Run is the whole program; cmd/kubectl-widgethub only calls it, so tests and
// the demo drive the same code in-process. Errors carry an exit code (see the
// Exit constants) and never contain tokens or kubeconfig content.
package plugin
