package hubtest

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/widgethub/widgethub/internal/fleet"
)

// ExpectNoneOf fails t if text, which says what, quotes one of values or
// any credential handed to the operator (fleet.HandOver).
func ExpectNoneOf(t *testing.T, what, text string, values []string) {
	t.Helper()
	for _, v := range values {
		if strings.Contains(text, v) {
			t.Errorf("%s quotes %q: %s", what, v, text)
		}
	}
	if leaked := fleet.LeakedIn(text); len(leaked) > 0 {
		t.Errorf("%s reveals a credential: %s", what, text)
	}
}

// RandomHex is 16 random bytes in hex: a value no test made before.
func RandomHex(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
