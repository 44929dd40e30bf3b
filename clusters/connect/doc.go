// Package connect says how the hub, and kubectl widgethub, may reach a
// member: the checked rest.Config of a member and the HTTP client built from
// it. It links no cache, informer, manager or typed clientset, so that the
// plugin shares the hub's checks without linking the hub.
//
// RESTConfig parses and validates a kubeconfig; ProfileConfig (profile.go)
// builds the config of a ClusterProfile's member through the
// administrator's access providers (LoadAccessProviders), the same checks
// applied. RESTConfig refuses exec and auth-provider credentials unless
// allowed (a Secret must never run a program inside the hub), uses the
// current context, and sets the member's QPS and burst.
//
// A member's answers are untrusted (answers.go): every client built from a
// member's config refuses redirects (ErrRedirectRefused) and bounds each
// answer, the pages of a paged list together, and each watch event, after
// decompression, and counts a list's items before they are decoded
// (items.go) (ErrResponseTooLarge;
// WithResponseLimit narrows the bound for one request), and logs the
// warnings its answers carry printable and bounded (warnings.go). Through a proxy, the
// member's host is checked against the dialer's refused destinations
// (dial.go: Dialer, ErrDestinationRefused) before the request leaves.
//
// A member's discovery documents are its word too (discovery.go):
// GetDiscovery reads one, bounded at MaxDiscoveryBytes, and ServedResources
// leaves out a resource whose name is not one path segment, so that neither
// the hub's RESTMapper nor the plugin's dynamic client takes a path from a
// member.
//
// TokenClaims (token.go) are what a ServiceAccount token says of itself,
// read and not verified.
package connect
