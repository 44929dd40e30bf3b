package members

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
)

// Token renewal. A registration that kubectl widgethub join wrote holds a
// token of the member's ServiceAccount widgethub-system/widgethub-member,
// bound to a Secret of its own in the member; its source marks it renewable
// (Registration.Renewal). Once less than RenewalOptions.Remaining of its
// lifetime is left, the replica that serves the member asks the member, with
// that token, for a new one: same ServiceAccount, same bound Secret, same
// lifetime. The source writes it into the registration together with the
// hub's record of the request (TokenIssue: when the hub asked, on its own
// clock, and for how long), and the next reconcile swaps it into the engaged
// member in place (no relist).
//
// The schedule is the hub's, not the member's: the claims of a token the
// member returned are read but not believed (the member may answer with any
// text it likes). A token the hub minted is renewed at its MintedAt plus
// (1-Remaining) of the lifetime the hub asked for, and never sooner than
// MinInterval after it was minted, whatever it claims; claims that do not fit
// the request (renewalSchedule) are reported by CredentialsExpiring (reason
// ImplausibleToken) and change nothing else. Only the first token, the one
// join minted, is scheduled from its claims, and then only if they are
// plausible. The decision reads only the registration, so it holds across
// restarts and replicas; only the backoff after failures is kept in memory.
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
	// DefaultMinRenewInterval is the least time between two renewals of a
	// member's token, whatever its tokens claim: half of the shortest
	// lifetime kube-apiserver issues.
	DefaultMinRenewInterval = connect.MinTokenLifetime / 2
	// renewSettle is how long after writing a renewed token the hub waits
	// for its cache to show it before it would renew again.
	renewSettle = 30 * time.Second
	// claimsSkew is how far a token's iat may stray from the moment the hub
	// asked for it (clock skew between hub and member, and the request's
	// own time), and lifetimeSkew how far its lifetime from the one asked
	// for, before the claims are implausible.
	claimsSkew   = 5 * time.Minute
	lifetimeSkew = time.Minute
)

// TokenRenewal is what a source tells the engine of a registration whose
// bearer token the hub renews (the source writes it back: TokenWriter).
type TokenRenewal struct {
	// BoundSecret names the Secret in the member that the token is bound to.
	BoundSecret string
	// Issued is the hub's record of the token it last wrote into the
	// registration; zero when there is none (a token join minted, or a
	// registration from before the record).
	Issued TokenIssue
}

// TokenIssue is the hub's own record of a token it asked a member for.
type TokenIssue struct {
	// MintedAt is when the hub sent the TokenRequest, on the hub's clock.
	MintedAt time.Time
	// Lifetime is the lifetime the hub asked for (expirationSeconds).
	Lifetime time.Duration
	// Token is TokenDigest of the token the record describes: a record
	// describes that token only.
	Token string
}

// Describes tells whether the record is of token.
func (i TokenIssue) Describes(token string) bool {
	return !i.MintedAt.IsZero() && i.Lifetime > 0 && i.Token != "" && i.Token == TokenDigest(token)
}

// TokenDigest identifies a token in a TokenIssue: the first 8 bytes of its
// SHA-256, in hex. It tells tokens apart and reveals nothing of them.
func TokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// ErrRegistrationChanged: the registration changed since the reconcile read it.
var ErrRegistrationChanged = errors.New("the registration changed meanwhile")

// RenewalOptions configure the renewal of the tokens join mints and the
// warning of the CredentialsExpiring condition.
type RenewalOptions struct {
	// Remaining is the fraction of a token's lifetime left when the hub
	// renews it, between 0 and 1. Defaults to DefaultRenewRemaining.
	Remaining float64
	// MinInterval is the least time between two renewals of a member's
	// token. Defaults to DefaultMinRenewInterval.
	MinInterval time.Duration
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
	orDefault(&o.MinInterval, DefaultMinRenewInterval)
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
	// implausible says why the token's claims are not believed; empty when
	// they are.
	implausible string
}

// schedule is when a renewable token is renewed, and with what.
type schedule struct {
	// renew: the hub renews the token, from renewAt on, asking for lifetime.
	renew    bool
	renewAt  time.Time
	lifetime time.Duration
	// expiry is when the token expires as far as the hub knows.
	expiry time.Time
	// implausible says why the claims are not believed; empty when they are.
	implausible string
}

// renewalSchedule is the schedule of a token with claims (ok: they could be
// read) that should be bound to the Secret bound, whose record issued is the
// hub's own or zero, given the time of the
// hub's last write of a token for this member (lastWrite, zero when none is
// remembered) and now. A token the hub minted is renewed on the hub's clock
// and may claim what it likes; a token it did not mint is renewed on its
// claims if they are plausible, and not at all otherwise.
func renewalSchedule(claims connect.TokenClaims, ok bool, bound string, issued TokenIssue, lastWrite, now time.Time, o RenewalOptions) schedule {
	own := !issued.MintedAt.IsZero()
	var s schedule
	switch {
	case !ok:
		s.implausible = "the token's claims cannot be read"
	case claims.Secret == "" || claims.Secret != bound:
		// The renewal would ask for a token bound to it: none at all.
		ok = false
		s.implausible = "the token claims to be bound to another Secret than the one the registration names"
	case !own && claims.Lifetime() < connect.MinTokenLifetime:
		s.implausible = fmt.Sprintf("the token claims a lifetime of %s, less than the API server issues", claims.Lifetime())
	case claims.IssuedAt.After(now.Add(claimsSkew)):
		s.implausible = "the token claims to be issued at " + stamp(claims.IssuedAt) + ", in the future"
	case own && claims.IssuedAt.Before(issued.MintedAt.Add(-claimsSkew)):
		s.implausible = "the token claims to be issued at " + stamp(claims.IssuedAt) + ", before the hub asked for it at " + stamp(issued.MintedAt)
	case own && (claims.Lifetime()-issued.Lifetime).Abs() > lifetimeSkew:
		s.implausible = fmt.Sprintf("the token claims a lifetime of %s; the hub asked for %s", claims.Lifetime(), issued.Lifetime)
	case own && !claims.Expiry.After(now) && issued.MintedAt.Add(issued.Lifetime).After(now):
		s.implausible = "the token claims it expired at " + stamp(claims.Expiry) + "; the hub asked for it to last until " + stamp(issued.MintedAt.Add(issued.Lifetime))
	}
	if own {
		s.expiry = issued.MintedAt.Add(issued.Lifetime)
	}
	if !ok || (!own && s.implausible != "") {
		// Nothing to renew it from: neither the token it would ask for
		// (ServiceAccount, bound Secret) nor a schedule to trust.
		return s
	}
	minted := claims.IssuedAt
	s.lifetime = claims.Lifetime()
	if own {
		minted, s.lifetime = issued.MintedAt, max(issued.Lifetime, connect.MinTokenLifetime)
	}
	if s.implausible == "" {
		s.expiry = claims.Expiry
	}
	s.renew = true
	s.renewAt = minted.Add(time.Duration(float64(s.lifetime) * (1 - o.Remaining)))
	if own {
		s.renewAt = later(s.renewAt, minted.Add(o.MinInterval))
	}
	if !lastWrite.IsZero() {
		s.renewAt = later(s.renewAt, lastWrite.Add(o.MinInterval))
	}
	return s
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// renew renews the member's token when it is due, from reg (this
// reconcile's registration, which writer writes back), and records in obs
// how the token stands. A failure leaves the member as it is (engaged with
// its current token, Ready as probed): it is retried with backoff, counted,
// and shown by CredentialsExpiring and an Event. The member is asked under
// memberCtx, which the queue may cancel; the hub is written under ctx.
func (m *member) renew(ctx, memberCtx context.Context, reg *Registration, writer TokenWriter, obs *observation) {
	ren := reg.Renewal
	if ren == nil || writer == nil {
		return
	}
	state, conn, e := m.current()
	if state == idle || e.hash != reg.Hash {
		return
	}
	token := e.cfg.REST.BearerToken
	if token == "" {
		return // no token to renew (a client certificate)
	}
	opts := m.env.opts.Renewal
	claims, ok := connect.ParseTokenClaims(token)
	now := time.Now()
	issued := ren.Issued
	if !issued.Describes(token) || issued.MintedAt.After(now.Add(claimsSkew)) {
		issued = TokenIssue{}
	}
	r := &m.renewal
	s := renewalSchedule(claims, ok, ren.BoundSecret, issued, r.wroteAt, now, opts)
	obs.renewal = credentials{renewable: s.renew, renewAt: s.renewAt, implausible: s.implausible}
	if s.implausible != "" {
		obs.tokenExpiry = s.expiry
		m.log.V(1).Info("The member's token makes implausible claims; the hub keeps its own schedule", "why", s.implausible)
	}
	if !s.renew {
		return
	}
	memberCredentialRenewalFailures.WithLabelValues(string(m.name)) // served from 0
	switch {
	case now.Before(s.renewAt):
		obs.requeueWithin(s.renewAt.Sub(now))
		return
	case state == parked:
		obs.renewal.failure = "the member is parked; the hub renews the token once the member answers again"
		return
	case !r.wroteAt.IsZero() && e.hash != r.wrote && now.Sub(r.wroteAt) < renewSettle:
		return // renewed: the hub cache shows the new token in a moment
	case now.Before(r.next):
		obs.renewal.failure = r.lastError
		obs.requeueWithin(r.next.Sub(now))
		return
	}
	expires, err := m.renewNow(ctx, memberCtx, conn, reg, writer, claims, s.lifetime)
	switch {
	case err == nil:
		m.log.Info("Renewed the member's token", "expires", stamp(expires), "failuresBefore", r.failures)
		m.env.recorder.Eventf(reg.Owner, nil, corev1.EventTypeNormal, tokenRenewedReason, "RenewToken",
			"renewed the member's token; the new one expires at %s", stamp(expires))
		*r = renewal{wrote: r.wrote, wroteAt: now}
		return
	case errors.Is(err, ErrRegistrationChanged):
		// The registration changed since this reconcile read it; the next
		// one reads it again.
		m.log.V(1).Info("Registration changed while renewing its token; trying again")
		obs.requeueWithin(time.Second)
		return
	}
	r.failures++
	r.lastError = withoutMemberText(err)
	delay := opts.Retry << min(r.failures-1, 16)
	if delay > opts.MaxRetry || delay <= 0 {
		delay = opts.MaxRetry
	}
	r.next = now.Add(delay)
	memberCredentialRenewalFailures.WithLabelValues(string(m.name)).Inc()
	m.log.Info("Could not renew the member's token; it is used until it expires", "error", r.lastError,
		"expires", stamp(s.expiry), "failures", r.failures, "retryAfter", delay)
	if r.failures == 1 {
		m.env.recorder.Eventf(reg.Owner, nil, corev1.EventTypeWarning, v1alpha1.MemberRenewalFailedReason, "RenewToken",
			"could not renew the member's token: %s; the hub keeps using it until it expires at %s", r.lastError, stamp(s.expiry))
	}
	obs.renewal.failure = r.lastError
	obs.requeueWithin(delay)
}

// renewNow asks the member, through conn, for a new token like the one
// claims describe, for lifetime, and has writer write it into reg with the
// hub's record of the request, provided reg is unchanged since it was read
// (else ErrRegistrationChanged).
func (m *member) renewNow(ctx, memberCtx context.Context, conn connection, reg *Registration, writer TokenWriter, claims connect.TokenClaims, lifetime time.Duration) (time.Time, error) {
	// First a dry run of the write: a hub that may not write the
	// registration, or one that changed, costs no token that nothing holds.
	if _, err := writer.WriteToken(ctx, reg, m.cfg.REST.BearerToken, reg.Renewal.Issued, true); err != nil {
		return time.Time{}, err
	}
	minted := time.Now()
	// The expiry the member states is as untrusted as its token's claims.
	token, _, err := conn.RenewToken(memberCtx, claims, lifetime)
	if err != nil {
		return time.Time{}, err
	}
	hash, err := writer.WriteToken(ctx, reg, token, TokenIssue{MintedAt: minted, Lifetime: lifetime, Token: TokenDigest(token)}, false)
	if err != nil {
		return time.Time{}, err
	}
	m.renewal.wrote = hash
	return minted.Add(lifetime), nil
}

// setCredentialsExpiring records when the registration's token expires
// (expiry, zero when unknown) and the CredentialsExpiring condition: for a
// token the hub renews (c.renewable), True only while a due renewal fails;
// for another, True from warning before its expiry on. It returns whether
// the condition is True.
func setCredentialsExpiring(status *v1alpha1.MemberClusterStatus, expiry time.Time, c credentials, warning time.Duration, now time.Time) bool {
	meta.RemoveStatusCondition(&status.Conditions, legacyTokenExpiring)
	if expiry.IsZero() && c.implausible == "" {
		status.TokenExpiry = nil
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.MemberCredentialsExpiring)
		return false
	}
	status.TokenExpiry = nil
	at := "an unknown time"
	if !expiry.IsZero() {
		status.TokenExpiry = &metav1.Time{Time: expiry}
		at = stamp(expiry)
	}
	cond := metav1.Condition{Type: v1alpha1.MemberCredentialsExpiring, Status: metav1.ConditionFalse, Reason: v1alpha1.MemberCredentialsValidReason,
		Message: "the token expires at " + at}
	left := expiry.Sub(now)
	switch {
	case c.renewable && c.failure != "" && left <= 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberRenewalFailedReason
		cond.Message = fmt.Sprintf("the token expired at %s; the hub could not renew it, due since %s: %s; renew it with kubectl widgethub join --overwrite",
			at, stamp(c.renewAt), c.failure)
	case c.renewable && c.failure != "":
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberRenewalFailedReason
		cond.Message = fmt.Sprintf("the hub could not renew the token, due since %s: %s; it keeps using it until it expires at %s",
			stamp(c.renewAt), c.failure, at)
	case c.implausible != "" && c.renewable:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberImplausibleTokenReason
		cond.Message = fmt.Sprintf("the member issued a token the hub does not believe: %s; the hub renews it on its own clock, from %s on (it asked for it to expire at %s)",
			c.implausible, stamp(c.renewAt), at)
	case c.implausible != "":
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.MemberImplausibleTokenReason
		cond.Message = fmt.Sprintf("the hub does not renew the token: %s; renew it with kubectl widgethub join --overwrite", c.implausible)
	case c.renewable:
		cond.Reason = v1alpha1.MemberCredentialsRenewableReason
		cond.Message = fmt.Sprintf("the hub renews the token from %s on; it expires at %s", stamp(c.renewAt), at)
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
		memberCredentialsExpiry.DeleteLabelValues(name)
	} else {
		memberCredentialsExpiry.WithLabelValues(name).Set(float64(expiry.Unix()))
	}
	v := 0.0
	if expiring {
		v = 1
	}
	memberCredentialsExpiring.WithLabelValues(name).Set(v)
}
