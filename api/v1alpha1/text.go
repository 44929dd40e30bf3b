package v1alpha1

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the text widgethub writes into the API. The CRDs declare the same
// bounds (maxLength), and Printable keeps every write within them.
const (
	// MaxMessageLength bounds the message of every condition and Event
	// widgethub writes, whatever a kubeconfig or a member's answer holds.
	MaxMessageLength = 1024
	// MaxVersionLength bounds MemberCluster status.kubernetesVersion. A
	// real gitVersion is about 20 bytes (v1.31.4-eks-2d5f260).
	MaxVersionLength = 64
	// MaxNameLength bounds an object name (a DNS-1123 subdomain), and
	// MemberCluster status.servedBy.
	MaxNameLength = 253
)

// truncated marks text that Printable cut.
const truncated = "..."

// Printable makes text that widgethub did not choose (a member's version,
// an error a member caused, the name of a member's object) safe to store in
// status or an Event, to log, and to print on a terminal. Every rune that
// unicode.IsPrint does not call printable (control characters, C0 including
// tab and newline, DEL and C1, so no escape sequence reaches a terminal;
// format characters such as bidi overrides and zero-width characters, which
// make displayed text differ from what it is; other spaces than ' ';
// unassigned and private-use runes) and every byte that is not UTF-8 is
// shown as a Go escape (\x1b, \u202e). The result is at most max bytes: a
// longer one is cut between runes or escapes and ends in "...". Only about
// max bytes of s are read, so a huge s costs no more than a short one.
func Printable(s string, max int) string {
	if max <= 0 {
		return ""
	}
	var b strings.Builder
	// kept is how long the result may be, marker included, when it must
	// be cut: the length after the last rune that leaves room for the
	// marker.
	kept := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var unit string
		switch {
		case r == utf8.RuneError && size == 1:
			unit = fmt.Sprintf(`\x%02x`, s[i])
		case r < utf8.RuneSelf && r >= ' ' && r != 0x7f, r >= utf8.RuneSelf && unicode.IsPrint(r):
			unit = s[i : i+size]
		case r < 0x80:
			unit = fmt.Sprintf(`\x%02x`, r)
		case r <= 0xffff:
			unit = fmt.Sprintf(`\u%04x`, r)
		default:
			unit = fmt.Sprintf(`\U%08x`, r)
		}
		if b.Len()+len(unit) > max {
			if max < len(truncated) {
				return b.String() // no room for the marker
			}
			return b.String()[:kept] + truncated
		}
		b.WriteString(unit)
		if b.Len() <= max-len(truncated) {
			kept = b.Len()
		}
		i += size
	}
	if b.Len() == len(s) {
		return s // nothing escaped: no copy
	}
	return b.String()
}

// Cut is the first n bytes of s at most, cut between runes (bytes that are
// not UTF-8 are cut where n falls); unlike Printable it leaves the text as it
// is, for a bound on what is held, not shown.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for back := 0; back < utf8.UTFMax-1 && n-back > 0; back++ {
		if utf8.RuneStart(s[n-back]) {
			return s[:n-back]
		}
	}
	return s[:n]
}
