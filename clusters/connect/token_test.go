package connect

import (
	"encoding/base64"
	"testing"
	"time"
)

func TestParseTokenClaims(t *testing.T) {
	jwt := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2lnbmF0dXJl"
	}
	bound := `{"iat":1800000000,"exp":1800000600,"kubernetes.io":{"namespace":"widgethub-system",` +
		`"serviceaccount":{"name":"widgethub-member","uid":"u1"},"secret":{"name":"widgethub-member-token-abcde","uid":"u2"}}}`
	for _, tc := range []struct {
		name   string
		token  string
		ok     bool
		secret string
	}{
		{"Secret-bound", jwt(bound), true, "widgethub-member-token-abcde"},
		{"unbound", jwt(`{"iat":1800000000,"exp":1800000600,"kubernetes.io":{"namespace":"ns","serviceaccount":{"name":"sa"}}}`), true, ""},
		{"no iat", jwt(`{"exp":1800000600,"kubernetes.io":{"namespace":"ns","serviceaccount":{"name":"sa"}}}`), false, ""},
		{"exp before iat", jwt(`{"iat":1800000600,"exp":1800000000,"kubernetes.io":{"namespace":"ns","serviceaccount":{"name":"sa"}}}`), false, ""},
		{"not a ServiceAccount's", jwt(`{"iat":1800000000,"exp":1800000600,"sub":"alice"}`), false, ""},
		{"opaque", "abcdef", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := ParseTokenClaims(tc.token)
			if ok != tc.ok || c.Secret != tc.secret {
				t.Fatalf("claims %+v, ok %v; want ok %v, secret %q", c, ok, tc.ok, tc.secret)
			}
			if ok && c.Lifetime() != 10*time.Minute {
				t.Errorf("lifetime %s, want 10m", c.Lifetime())
			}
			if tc.secret != "" && (c.SecretUID != "u2" || c.ServiceAccount != "widgethub-member" || c.Namespace != "widgethub-system") {
				t.Errorf("claims %+v", c)
			}
		})
	}
}

// A request for exactly 3607 s is what kube-apiserver may extend to a year.
func TestTokenRequestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		10 * time.Minute:       600,
		3607 * time.Second:     3608,
		time.Hour:              3600,
		7 * 24 * time.Hour:     604800,
		3607*time.Second + 1e8: 3608,
		3606*time.Second + 9e8: 3606,
	} {
		if got := TokenRequestSeconds(d); got != want {
			t.Errorf("TokenRequestSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}
