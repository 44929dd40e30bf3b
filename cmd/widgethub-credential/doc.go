// Command widgethub-credential is a client-go exec credential plugin
// (client.authentication.k8s.io/v1 ExecCredential) that hands out member
// tokens kept in a directory the hub's administrator controls. It is the
// access provider of the tests and the demo for members registered by
// ClusterProfiles (see docs/registration.md), and a small example of one.
//
// Usage, as the execConfig of a provider in --clusterprofile-provider-file:
//
//	{"providers": [{"name": "widgethub-tokens", "execConfig": {
//	  "apiVersion": "client.authentication.k8s.io/v1",
//	  "command": "/usr/local/bin/widgethub-credential",
//	  "args": ["--token-dir=/etc/widgethub/tokens"],
//	  "provideClusterInfo": true}}]}
//
// The directory holds one subdirectory per member, <member>/token (the
// bearer token) and <member>/server (the member's API server URL). The
// member is named by the cluster's "client.authentication.k8s.io/exec"
// extension, {"member": "<name>"}, which reaches the plugin in
// KUBERNETES_EXEC_INFO when the provider sets provideClusterInfo, or by
// --member.
//
// Everything KUBERNETES_EXEC_INFO holds comes from a ClusterProfile, which
// anyone who may write one controls: the plugin hands out a member's token
// only when the server it is told is the one in <member>/server (so a
// profile cannot send a member's token elsewhere), accepts only plain member
// names (no path), and never echoes what it read.
package main
