package plugin

import (
	"encoding/base64"
	"testing"
	"time"
)

func TestTokenExpiry(t *testing.T) {
	jwt := func(payload string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + ".c2lnbmF0dXJl"
	}
	for _, tc := range []struct {
		name, token string
		want        string // RFC 3339, "" for none
	}{
		{"integer exp", jwt(`{"exp":1900000000,"sub":"system:serviceaccount:a:b"}`), "2030-03-17T17:46:40Z"},
		{"float exp", jwt(`{"exp":1900000000.7}`), "2030-03-17T17:46:40Z"},
		{"no exp", jwt(`{"sub":"x"}`), ""},
		{"exp not a number", jwt(`{"exp":"soon"}`), ""},
		{"zero exp", jwt(`{"exp":0}`), ""},
		{"payload not JSON", jwt(`nope`), ""},
		{"payload not base64", "a.%%%.c", ""},
		{"not a JWT", "static-token", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, ok := tokenExpiry(tc.token)
			got := ""
			if ok {
				got = exp.Format(time.RFC3339)
			}
			if got != tc.want {
				t.Errorf("tokenExpiry = %q, want %q", got, tc.want)
			}
		})
	}
}
