package members

import (
	"strings"
	"testing"
	"time"

	"github.com/widgethub/widgethub/clusters/connect"
)

// The hub renews a token it minted on its own clock, at most once per
// (1-Remaining) of the lifetime it asked for and never within MinInterval
// of the last renewal, whatever the token claims; claims that do not fit
// the request are reported. A token it did not mint (join's) is renewed on
// its claims, and only when they are plausible.
func TestRenewalSchedule(t *testing.T) {
	// The documented defaults, written as numbers: a changed default fails
	// here, not only in the code that reads the constants.
	const minRenewInterval, minTokenLifetime = 5 * time.Minute, 10 * time.Minute
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	day, lifetime := 24*time.Hour, 24*time.Hour
	opts := RenewalOptions{}
	opts.defaults()
	minted := now.Add(-time.Hour)
	own := TokenIssue{MintedAt: minted, Lifetime: lifetime, Token: "0123456789abcdef"}
	claimsOf := func(iat time.Time, life time.Duration) connect.TokenClaims {
		return connect.TokenClaims{IssuedAt: iat, Expiry: iat.Add(life), Secret: "bound"}
	}
	for _, tc := range []struct {
		name      string
		claims    connect.TokenClaims
		ok        bool
		issued    TokenIssue
		lastWrite time.Time
		o         func(*RenewalOptions)
		// want: renewed (at renewAt, asking for lifetime) or not; the
		// implausibility reported, "" for none, else a part of it.
		renew        bool
		renewAt      time.Time
		wantLifetime time.Duration
		implausible  string
		expiry       time.Time
	}{
		{name: "join's token, on its claims", claims: claimsOf(minted, lifetime), ok: true,
			renew: true, renewAt: minted.Add(lifetime / 2), wantLifetime: lifetime, expiry: minted.Add(lifetime)},
		{name: "join's token, expired: due now", claims: claimsOf(now.Add(-10*day), lifetime), ok: true,
			renew: true, renewAt: now.Add(-10 * day).Add(lifetime / 2), wantLifetime: lifetime, expiry: now.Add(-9 * day)},
		{name: "join's token issued in the future", claims: claimsOf(now.Add(time.Hour), lifetime), ok: true,
			implausible: "in the future"},
		{name: "join's token shorter than the API server issues", claims: claimsOf(minted, time.Minute), ok: true,
			implausible: "lifetime of 1m0s"},
		{name: "unreadable, not the hub's", ok: false, implausible: "cannot be read"},
		{name: "the hub's, claims as asked", claims: claimsOf(minted.Add(2*time.Second), lifetime), ok: true, issued: own,
			renew: true, renewAt: minted.Add(lifetime / 2), wantLifetime: lifetime, expiry: minted.Add(2 * time.Second).Add(lifetime)},
		{name: "the hub's, claiming to be ten days old", claims: claimsOf(now.Add(-10*day), lifetime), ok: true, issued: own,
			renew: true, renewAt: minted.Add(lifetime / 2), wantLifetime: lifetime, implausible: "before the hub asked", expiry: minted.Add(lifetime)},
		{name: "the hub's, issued in the future", claims: claimsOf(now.Add(time.Hour), lifetime), ok: true, issued: own,
			renew: true, renewAt: minted.Add(lifetime / 2), wantLifetime: lifetime, implausible: "in the future", expiry: minted.Add(lifetime)},
		{name: "the hub's, another lifetime", claims: claimsOf(minted, 11*time.Minute), ok: true, issued: own,
			renew: true, renewAt: minted.Add(lifetime / 2), wantLifetime: lifetime, implausible: "the hub asked for 24h0m0s", expiry: minted.Add(lifetime)},
		{name: "the hub's, a lifetime within the tolerance", claims: claimsOf(minted, lifetime+30*time.Second), ok: true, issued: own,
			renew: true, renewAt: minted.Add(lifetime / 2), wantLifetime: lifetime, expiry: minted.Add(lifetime + 30*time.Second)},
		{name: "the hub's, claiming it expired", claims: connect.TokenClaims{IssuedAt: minted, Expiry: now.Add(-time.Second), Secret: "bound"}, ok: true,
			issued: TokenIssue{MintedAt: minted, Lifetime: time.Hour + 30*time.Second, Token: "x"},
			renew:  true, renewAt: minted.Add(30*time.Minute + 15*time.Second), wantLifetime: time.Hour + 30*time.Second, implausible: "expired at",
			expiry: now.Add(30 * time.Second)},
		{name: "the hub's, unreadable", ok: false, issued: own, implausible: "cannot be read", expiry: minted.Add(lifetime)},
		{name: "the hub's, bound to another Secret", claims: connect.TokenClaims{IssuedAt: minted, Expiry: minted.Add(lifetime), Secret: "other"}, ok: true,
			issued: own, implausible: "bound to another Secret", expiry: minted.Add(lifetime)},
		{name: "join's token, bound to no Secret", claims: connect.TokenClaims{IssuedAt: minted, Expiry: minted.Add(lifetime)}, ok: true,
			implausible: "bound to another Secret"},
		{name: "the hub's, renewing often: never within MinInterval of its minting",
			claims: claimsOf(minted, lifetime), ok: true, issued: own, o: func(o *RenewalOptions) { o.Remaining = 0.9999 },
			renew: true, renewAt: minted.Add(minRenewInterval), wantLifetime: lifetime, expiry: minted.Add(lifetime)},
		{name: "join's token, renewing often: never within MinInterval of the last write",
			claims: claimsOf(now.Add(-10*day), lifetime), ok: true, lastWrite: now.Add(-time.Minute),
			renew: true, renewAt: now.Add(-time.Minute).Add(minRenewInterval), wantLifetime: lifetime, expiry: now.Add(-9 * day)},
		{name: "the hub's, a record asking for less than the API server issues",
			claims: claimsOf(minted, time.Second), ok: true, issued: TokenIssue{MintedAt: minted, Lifetime: time.Second, Token: "x"},
			renew: true, renewAt: minted.Add(minRenewInterval), wantLifetime: minTokenLifetime, expiry: minted.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			if tc.o != nil {
				tc.o(&o)
			}
			s := renewalSchedule(tc.claims, tc.ok, "bound", tc.issued, tc.lastWrite, now, o)
			if s.renew != tc.renew || !s.renewAt.Equal(tc.renewAt) || s.lifetime != tc.wantLifetime {
				t.Errorf("renew %v at %s for %s, want %v at %s for %s", s.renew, s.renewAt, s.lifetime, tc.renew, tc.renewAt, tc.wantLifetime)
			}
			if (s.implausible == "") != (tc.implausible == "") || !strings.Contains(s.implausible, tc.implausible) {
				t.Errorf("implausible %q, want %q", s.implausible, tc.implausible)
			}
			if !s.expiry.Equal(tc.expiry) {
				t.Errorf("expiry %s, want %s", s.expiry, tc.expiry)
			}
		})
	}
}

// However a member's tokens claim, the hub's own schedule renews a token it
// minted at most once per half-life, and never more often than MinInterval:
// a member answering every renewal with a token that claims to be ten days
// old is renewed twice a day, not on every reconcile.
func TestRenewalScheduleBoundsForgedClaims(t *testing.T) {
	opts := RenewalOptions{}
	opts.defaults()
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	lifetime := 24 * time.Hour
	forged := func(now time.Time) connect.TokenClaims {
		return connect.TokenClaims{IssuedAt: now.Add(-240 * time.Hour), Expiry: now.Add(-216 * time.Hour), Secret: "bound"}
	}
	// join's token, then every renewal forged; reconciles every second for two days.
	claims, issued := connect.TokenClaims{IssuedAt: start, Expiry: start.Add(lifetime), Secret: "bound"}, TokenIssue{}
	var renewals []time.Time
	for now := start; now.Before(start.Add(2 * lifetime)); now = now.Add(time.Second) {
		var last time.Time
		if n := len(renewals); n > 0 {
			last = renewals[n-1]
		}
		if s := renewalSchedule(claims, true, "bound", issued, last, now, opts); s.renew && !now.Before(s.renewAt) {
			renewals = append(renewals, now)
			claims, issued = forged(now), TokenIssue{MintedAt: now, Lifetime: s.lifetime, Token: "x"}
		}
	}
	if len(renewals) != 3 {
		t.Errorf("%d renewals in two days of a 24-hour token whose renewals claim to be ten days old, want 3 (at 12, 24 and 36 hours): %v", len(renewals), renewals)
	}
}
