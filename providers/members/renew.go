package members

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

// Token renewal. A registration that kubectl widgethub join wrote holds a
// token of the member's ServiceAccount widgethub-system/widgethub-member,
// bound to a Secret of its own in the member; its source marks it renewable
// (Registration.Renewal). Once less than RenewalOptions.Remaining of its
// lifetime is left, the replica that serves the member asks the member, with
// that token, for a new one: same ServiceAccount, same bound Secret, same
// lifetime. The source writes it into the registration (nothing else
// changes), and the next reconcile swaps it into the engaged member in place
// (no relist). The decision reads only the token of the registration, so it
// holds across restarts and replicas; only the backoff after failures is
// kept in memory.
//
// The old token is not revoked: it was bound to the same Secret, so it stays
// valid until its own expiry, at most Remaining of a lifetime later. Deleting
// the bound Secret (unjoin) still revokes every token of the registration.
const (
	// DefaultRenewRemaining renews a token once half of its lifetime is left.
	DefaultRenewRemaining = 0.5
	// DefaultRenewRetry and DefaultMaxRenewRetry bound the backoff after a
	// failed renewal: the first retry after 10 s, doubling up to 5 minutes.
	DefaultRenewRetry    = 10 * time.Second
	DefaultMaxRenewRetry = 5 * time.Minute
	// renewSettle is how long after writing a renewed token the hub waits
	// for its cache to show it before it would renew again.
	renewSettle = 30 * time.Second
)

// TokenRenewal is what a source tells the engine of a registration whose
// bearer token the hub renews.
type TokenRenewal struct {
	// BoundSecret names the Secret in the member that the token is bound to.
	BoundSecret string
	// Write writes token into the registration in place of its current
	// token, provided the registration is unchanged since it was read (else
	// an error wrapping ErrRegistrationChanged) and nothing but the token
	// would change, and returns the new registration's Hash. A dry run
	// checks the write only.
	Write func(ctx context.Context, token string, dryRun bool) (hash [sha256.Size]byte, err error)
}

// ErrRegistrationChanged: the registration changed since the reconcile read it.
var ErrRegistrationChanged = errors.New("the registration changed meanwhile")

// RenewalOptions configure the renewal of the tokens join mints and the
// warning of the CredentialsExpiring condition.
type RenewalOptions struct {
	// Remaining is the fraction of a token's lifetime left when the hub
	// renews it, between 0 and 1. Defaults to DefaultRenewRemaining.
	Remaining float64
	// Retry is the wait after a failed renewal, doubled after each failure
	// in a row up to MaxRetry. Default DefaultRenewRetry, DefaultMaxRenewRetry.
	Retry, MaxRetry time.Duration
	// ExpiryWarning is how long before a token the hub does not renew
	// expires CredentialsExpiring turns True. Defaults to
	// v1alpha1.TokenExpiryWarning.
	ExpiryWarning time.Duration
}

func (o *RenewalOptions) defaults() {
	if o.Remaining <= 0 || o.Remaining >= 1 {
		o.Remaining = DefaultRenewRemaining
	}
	orDefault(&o.Retry, DefaultRenewRetry)
	orDefault(&o.MaxRetry, DefaultMaxRenewRetry)
	orDefault(&o.ExpiryWarning, v1alpha1.TokenExpiryWarning)
}

// renewal is what the hub remembers of an engaged member's renewals.
type renewal struct {
	failures  int
	lastError string
	// next is the earliest time of the next attempt after a failure.
	next time.Time
	// wrote is the SHA-256 of the kubeconfig last written, at wroteAt.
	wrote   [sha256.Size]byte
	wroteAt time.Time
}

// credentials is how the registration's token stands besides its expiry.
type credentials struct {
	// renewable: the hub renews the token, from renewAt on.
	renewable bool
	renewAt   time.Time
	// failure says why a due renewal did not happen; empty when none failed.
	failure string
}

// renewToken renews the token of the registration reg, engaged as the
// member called name, when it is due, and records in obs how it stands. A
// failure leaves the member as it is (engaged with its current token,
// Ready as probed): it is retried with backoff, counted, and shown by
// CredentialsExpiring and an Event.
func (p *Provider) renewToken(ctx context.Context, name multicluster.ClusterName, reg *Registration, obs *observation, log logr.Logger) {
	ren := reg.Renewal
	if ren == nil {
		return
	}
	p.mu.RLock()
	engaged, pk := p.members[name], p.parked[name]
	p.mu.RUnlock()
	var e *engagement
	switch {
	case engaged != nil:
		e = &engaged.engagement
	case pk != nil:
		e = &pk.engagement
	default:
		return
	}
	claims, ok := clusters.ParseTokenClaims(e.cfg.REST.BearerToken)
	if !ok || claims.Secret == "" || claims.Secret != ren.BoundSecret ||
		claims.Lifetime() < clusters.MinTokenLifetime || e.hash != reg.Hash {
		return
	}
	clusters.MemberCredentialRenewalFailures.WithLabelValues(string(name)) // served from 0
	now := time.Now()
	renewAt := claims.Expiry.Add(-time.Duration(float64(claims.Lifetime()) * p.opts.Renewal.Remaining))
	obs.renewal = credentials{renewable: true, renewAt: renewAt}
	switch {
	case now.Before(renewAt):
		obs.requeueWithin(renewAt.Sub(now))
		return
	case engaged == nil:
		obs.renewal.failure = "the member is parked; the hub renews the token once the member answers again"
		return
	}
	r := &engaged.renewal
	if !r.wroteAt.IsZero() && engaged.hash != r.wrote && now.Sub(r.wroteAt) < renewSettle {
		return // renewed: the hub cache shows the new token in a moment
	}
	if now.Before(r.next) {
		obs.renewal.failure = r.lastError
		obs.requeueWithin(r.next.Sub(now))
		return
	}
	expires, err := p.renewNow(ctx, ren, engaged, claims)
	switch {
	case err == nil:
		log.Info("Renewed the member's token", "expires", expires.UTC().Format(time.RFC3339), "failuresBefore", r.failures)
		p.recorder.Eventf(reg.Owner, nil, corev1.EventTypeNormal, tokenRenewedReason, "RenewToken",
			"renewed the member's token; the new one expires at %s", expires.UTC().Format(time.RFC3339))
		*r = renewal{wrote: r.wrote, wroteAt: now}
		return
	case errors.Is(err, ErrRegistrationChanged):
		// The registration changed since this reconcile read it; the next
		// one reads it again.
		log.V(1).Info("Registration changed while renewing its token; trying again")
		obs.requeueWithin(time.Second)
		return
	}
	r.failures++
	r.lastError = withoutMemberText(err)
	delay := p.opts.Renewal.Retry << min(r.failures-1, 16)
	if delay > p.opts.Renewal.MaxRetry || delay <= 0 {
		delay = p.opts.Renewal.MaxRetry
	}
	r.next = now.Add(delay)
	clusters.MemberCredentialRenewalFailures.WithLabelValues(string(name)).Inc()
	log.Info("Could not renew the member's token; it is used until it expires", "error", r.lastError,
		"expires", claims.Expiry.UTC().Format(time.RFC3339), "failures", r.failures, "retryAfter", delay)
	if r.failures == 1 {
		p.recorder.Eventf(reg.Owner, nil, corev1.EventTypeWarning, v1alpha1.MemberRenewalFailedReason, "RenewToken",
			"could not renew the member's token: %s; the hub keeps using it until it expires at %s", r.lastError, claims.Expiry.UTC().Format(time.RFC3339))
	}
	obs.renewal.failure = r.lastError
	obs.requeueWithin(delay)
}

// renewNow asks the member for a new token like the one claims describe and
// has ren write it into the registration, provided the registration is
// unchanged since it was read (else ErrRegistrationChanged).
func (p *Provider) renewNow(ctx context.Context, ren *TokenRenewal, reg *registration, claims clusters.TokenClaims) (time.Time, error) {
	// First a dry run of the write: a hub that may not write the
	// registration, or one that changed, costs no token that nothing holds.
	if _, err := ren.Write(ctx, reg.cfg.REST.BearerToken, true); err != nil {
		return time.Time{}, err
	}
	token, expires, err := reg.member.RenewToken(ctx, claims)
	if err != nil {
		return time.Time{}, err
	}
	hash, err := ren.Write(ctx, token, false)
	if err != nil {
		return time.Time{}, err
	}
	reg.renewal.wrote = hash
	return expires, nil
}

// requeueWithin makes the reconcile come back within d at the latest.
func (o *observation) requeueWithin(d time.Duration) {
	if d > 0 && (o.result.RequeueAfter == 0 || d < o.result.RequeueAfter) {
		o.result.RequeueAfter = d
	}
}

// setCredentialsExpiring records when the registration's token expires
// (expiry, zero when unknown) and the CredentialsExpiring condition: for a
// token the hub renews (c.renewable), True only while a due renewal fails;
// for another, True from warning before its expiry on. It returns whether
// the condition is True.
func setCredentialsExpiring(status *v1alpha1.MemberClusterStatus, expiry time.Time, c credentials, warning time.Duration, now time.Time) bool {
	meta.RemoveStatusCondition(&status.Conditions, legacyTokenExpiring)
	if expiry.IsZero() {
		status.TokenExpiry = nil
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.MemberCredentialsExpiring)
		return false
	}
	status.TokenExpiry = &metav1.Time{Time: expiry}
	at := expiry.UTC().Format(time.RFC3339)
	cond := metav1.Condition{Type: v1alpha1.MemberCredentialsExpiring, Status: metav1.ConditionFalse, Reason: v1alpha1.MemberCredentialsValidReason,
		Message: "the token expires at " + at}
	left := expiry.Sub(now)
	switch {
	case c.renewable && c.failure != "" && left <= 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberRenewalFailedReason
		cond.Message = fmt.Sprintf("the token expired at %s; the hub could not renew it, due since %s: %s; renew it with kubectl widgethub join --overwrite",
			at, c.renewAt.UTC().Format(time.RFC3339), c.failure)
	case c.renewable && c.failure != "":
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberRenewalFailedReason
		cond.Message = fmt.Sprintf("the hub could not renew the token, due since %s: %s; it keeps using it until it expires at %s",
			c.renewAt.UTC().Format(time.RFC3339), c.failure, at)
	case c.renewable:
		cond.Reason = v1alpha1.MemberCredentialsRenewableReason
		cond.Message = fmt.Sprintf("the hub renews the token from %s on; it expires at %s", c.renewAt.UTC().Format(time.RFC3339), at)
	case left <= 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberCredentialsExpiresSoonReason
		cond.Message = "the token expired at " + at + "; renew it with kubectl widgethub join --overwrite"
	case left < warning:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberCredentialsExpiresSoonReason
		cond.Message += "; renew it with kubectl widgethub join --overwrite"
	}
	cond.Message = v1alpha1.TruncateMessage(cond.Message)
	meta.SetStatusCondition(&status.Conditions, cond)
	return cond.Status == metav1.ConditionTrue
}

// tokenRenewedReason is the reason of the Event of a renewed token.
const tokenRenewedReason = "TokenRenewed"

// legacyTokenExpiring is the condition CredentialsExpiring replaced; it is
// removed from the MemberClusters that still show it.
const legacyTokenExpiring = "TokenExpiring"

// recordCredentials sets the credential metrics of the member called name.
func recordCredentials(name string, expiry time.Time, expiring bool) {
	if expiry.IsZero() {
		clusters.MemberCredentialsExpiry.DeleteLabelValues(name)
	} else {
		clusters.MemberCredentialsExpiry.WithLabelValues(name).Set(float64(expiry.Unix()))
	}
	v := 0.0
	if expiring {
		v = 1
	}
	clusters.MemberCredentialsExpiring.WithLabelValues(name).Set(v)
}
