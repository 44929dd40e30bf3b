package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons of a MemberCluster.
const (
	// MemberReady is True when the member is engaged and answers its health probes.
	MemberReady = "Ready"

	// MemberEngagedReason: the member is engaged and healthy.
	MemberEngagedReason = "Engaged"
	// MemberUnreachableReason: the member's API server does not answer.
	MemberUnreachableReason = "Unreachable"
	// MemberInvalidKubeconfigReason: the registration Secret holds no usable kubeconfig.
	MemberInvalidKubeconfigReason = "InvalidKubeconfig"
	// MemberExecPluginRefusedReason: the kubeconfig asks for a credential plugin and those are not allowed.
	MemberExecPluginRefusedReason = "ExecPluginRefused"
	// MemberUnsafeKubeconfigReason: the kubeconfig names a file of the hub, a
	// proxy or another identity, or skips TLS verification; nothing was sent.
	MemberUnsafeKubeconfigReason = "UnsafeKubeconfig"
	// MemberWidgetCRDMissingReason: the member does not serve the Widget API.
	MemberWidgetCRDMissingReason = "WidgetCRDMissing"
	// MemberUnauthorizedReason: the member rejects the kubeconfig's credentials (401).
	MemberUnauthorizedReason = "Unauthorized"
	// MemberForbiddenReason: the member forbids what the operator needs (403).
	MemberForbiddenReason = "Forbidden"
	// MemberDegradedReason: the member answers its probes, but most of its
	// Widgets (at least 10) failed their latest reconcile (for example, its
	// writes are refused).
	MemberDegradedReason = "Degraded"
	// MemberNoAccessProviderReason: the ClusterProfile names no access
	// provider that the hub's administrator configured; nothing was run.
	MemberNoAccessProviderReason = "NoAccessProvider"
	// MemberResponseTooLargeReason: an answer of the member (or one event of
	// a watch) was larger than the hub accepts, counted after decompression;
	// it was not read further (connect.ErrResponseTooLarge).
	MemberResponseTooLargeReason = "ResponseTooLarge"
	// MemberRedirectRefusedReason: the member answered with a redirect, which
	// the hub never follows (connect.ErrRedirectRefused).
	MemberRedirectRefusedReason = "RedirectRefused"
	// MemberTooManyObjectsReason: the member's caches would hold more
	// objects than the hub allows per member (--member-max-objects): they
	// were stopped, and the member is parked until it holds fewer.
	MemberTooManyObjectsReason = "TooManyObjects"

	// MemberNameConflict is True on the MemberCluster of a member whose name
	// another registration claims too (a ClusterProfile named like a
	// registration Secret): this registration keeps the name, the other
	// waits, reported by an Event with reason MemberNameConflictReason.
	MemberNameConflict = "NameConflict"
	// MemberNameConflictReason: another registration claims the same member name.
	MemberNameConflictReason = "NameConflict"

	// MemberReconciling is True (kstatus convention) while the hub is on its
	// way to an engaged, healthy member and needs no change to get there:
	// reason MemberEngagingReason while it checks and engages the member,
	// MemberUnreachableReason while it waits for the member to answer.
	MemberReconciling = "Reconciling"
	// MemberStalled is True (kstatus convention) while the member cannot be
	// engaged, or its Widgets reconciled, without a change by a user: to the
	// registration Secret, the member's RBAC, its CRDs or what refuses its
	// writes. Its reason is Ready's: InvalidKubeconfig, ExecPluginRefused,
	// UnsafeKubeconfig, Unauthorized, Forbidden, WidgetCRDMissing, Degraded,
	// NoAccessProvider, ResponseTooLarge, RedirectRefused or TooManyObjects.
	MemberStalled = "Stalled"
	// MemberPinned says, on a sharded hub, whether the member's pin (the
	// registration's widgethub.io/replica annotation) is followed: True
	// (reason MemberPinHonouredReason) while it is served by the replica it
	// is pinned to; False while the replica is not live
	// (MemberPinnedReplicaNotLiveReason) or serves its fair share already
	// (MemberPinBeyondFairShareReason), and the member is shared out like
	// an unpinned one. Absent for a member without a pin.
	MemberPinned = "Pinned"
	// MemberPinHonouredReason: the member is served by its pinned replica.
	MemberPinHonouredReason = "PinHonoured"
	// MemberPinnedReplicaNotLiveReason: the pinned replica is not live.
	MemberPinnedReplicaNotLiveReason = "PinnedReplicaNotLive"
	// MemberPinBeyondFairShareReason: the pinned replica serves its fair
	// share of members already; the manager's
	// --allow-pins-beyond-fair-share lets it take more.
	MemberPinBeyondFairShareReason = "PinBeyondFairShare"

	// MemberEngagingReason (Reconciling): the hub is checking the member and
	// starting its caches with a new kubeconfig.
	MemberEngagingReason = "Engaging"

	// MemberCredentialsExpiring warns that the registration's credentials
	// will stop working: True (reason MemberRenewalFailedReason) while the
	// hub cannot renew a token it renews (one kubectl widgethub join
	// minted), or (reason MemberCredentialsExpiresSoonReason) from
	// TokenExpiryWarning before a token it does not renew expires. A token
	// the hub renews that merely nears its renewal is no warning. Absent when
	// the token's expiry is unknown (no token, or not a JWT).
	MemberCredentialsExpiring = "CredentialsExpiring"
	// MemberCredentialsExpiresSoonReason: a token the hub does not renew
	// expires within TokenExpiryWarning, or has expired.
	MemberCredentialsExpiresSoonReason = "ExpiresSoon"
	// MemberCredentialsValidReason: a token the hub does not renew is valid
	// for longer than TokenExpiryWarning.
	MemberCredentialsValidReason = "Valid"
	// MemberCredentialsRenewableReason: the hub renews the token before it
	// expires, and no renewal has failed.
	MemberCredentialsRenewableReason = "Renewable"
	// MemberRenewalFailedReason: the token's renewal is due and failed; the
	// hub keeps using the token until it expires, and retries with backoff.
	MemberRenewalFailedReason = "RenewalFailed"
	// MemberImplausibleTokenReason: the member issued a token whose claims
	// do not fit what the hub asked for (expired, issued in the future or
	// long before the hub asked, another lifetime, unreadable). The hub
	// renews a token it asked for on its own clock whatever the token
	// claims, and does not renew one it did not ask for.
	MemberImplausibleTokenReason = "ImplausibleToken"
)

// TokenExpiryWarning is how long before a token the hub does not renew
// expires the member says so.
const TokenExpiryWarning = 14 * 24 * time.Hour

// MemberClusterStatus is what the hub observes of one registered member.
type MemberClusterStatus struct {
	// Conditions describe the member's state; see the Ready condition.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// KubernetesVersion is the member API server's version, as last probed:
	// its gitVersion, made printable and cut to MaxVersionLength bytes
	// (Printable), as the member chooses it.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// Widgets is how many Widgets the member holds.
	// +optional
	Widgets int32 `json:"widgets"`

	// LastProbeTime is when the member was last probed.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// TokenExpiry is when the registration's bearer token expires, read from
	// its exp claim (not verified); unset when unknown.
	// +optional
	TokenExpiry *metav1.Time `json:"tokenExpiry,omitempty"`

	// ServedBy is the id of the hub replica that serves the member when the
	// hub is sharded (--sharding); empty otherwise. It is a DNS-1123
	// subdomain (MaxNameLength).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServedBy string `json:"servedBy,omitempty"`
}

// MemberCluster shows the hub's view of one member registered by a kubeconfig
// Secret of the same name and namespace. It is written only by widgethub.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mc
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Widgets",type=integer,JSONPath=`.status.widgets`
// +kubebuilder:printcolumn:name="Served-By",type=string,JSONPath=`.status.servedBy`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status MemberClusterStatus `json:"status,omitempty"`
}

// MemberClusterList is a list of MemberClusters.
//
// +kubebuilder:object:root=true
type MemberClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MemberCluster{}, &MemberClusterList{})
}
