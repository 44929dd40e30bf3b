// Package clusters turns a member's kubeconfig into a running, health-checkable
// controller-runtime cluster.
//
// RESTConfig parses and validates a kubeconfig; ProfileConfig (profile.go)
// builds the config of a ClusterProfile's member through the
// administrator's access providers (LoadAccessProviders), the same checks
// applied. RESTConfig refuses exec and auth-provider credentials unless
// allowed (a Secret must never run a program
// inside the hub), uses the current context, and sets the member's QPS and
// burst. New builds a Member from that config with its own HTTP client and
// dialer. Member.Preflight checks a member before its caches start (version,
// kinds served, list permission); Member.Version is the cheap health probe;
// Member.StartAndSync runs the member's cache on a context that lives as long
// as the member and waits, with a bound, for the informers the operator
// needs. Member.Stop ends it all and closes every connection the member
// opened, so that members coming and going leave nothing behind;
// Member.Drain first refuses new requests and waits for those in flight, for
// a member handed to another hub replica. MemberOptions.Gate is asked before
// every request (a sharded hub refuses once its replica's term is over).
//
// A member's answers are untrusted (answers.go): every client built from a
// member's config refuses redirects (ErrRedirectRefused) and bounds each
// answer, and each watch event, after decompression (ErrResponseTooLarge);
// a refusal met in a watch or a reconcile is reported by the next Preflight.
// Through a proxy, the member's host is checked against the dialer's refused
// destinations before the request leaves.
//
// Each Member's Events go through a budget (events.go), and their notes are
// printable and bounded (text.go: PrintableRecorder): they quote what
// members chose. The one metric written here is the Events a Member dropped
// (metrics.go, widgethub_member_events_dropped_total); the engine writes the
// other per-member series. NewScheme is the scheme of the hub and the
// members.
package clusters
