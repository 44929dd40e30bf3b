// Package clusters turns a member's checked config (package connect) into a
// running, health-checkable controller-runtime cluster: the hub's one
// per-member type, Member. NewScheme is the scheme of the hub and its
// members.
//
// New builds a Member from a connect.Config with its own HTTP client and
// dialer, both guarded by connect. Member.Preflight checks a member before
// its caches start (version, kinds served, list permission);
// Member.Version is the cheap health probe; Member.StartAndSync runs the
// member's cache on a context that lives as long as the member and waits,
// with a bound, for the informers the operator needs. Member.Stop ends it
// all and closes every connection the member opened, so that members coming
// and going leave nothing behind; Member.Drain first refuses new requests and
// waits for those in flight, for a member handed to another hub replica.
// MemberOptions.Gate is asked before every request (a sharded hub refuses
// once its replica's term is over). Member.RenewToken asks the member for a
// new token of the hub's ServiceAccount (token.go).
//
// A member's answers are untrusted: connect's guard refuses redirects and
// bounds every answer; a refusal met in a watch or a reconcile is reported
// by the next Preflight, whose own requests are bounded tighter
// (preflight.go).
//
// Each Member's Events go through a budget (events.go), and their notes are
// printable and bounded (text.go: PrintableRecorder): they quote what
// members chose. The one metric written here is the Events a Member dropped
// (metrics.go, widgethub_member_events_dropped_total); the engine writes the
// other per-member series.
package clusters
