package v1alpha1_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "a real version is kept", in: "v1.31.4-eks-2d5f260", max: 64, want: "v1.31.4-eks-2d5f260"},
		{name: "printable non-ASCII is kept", in: "größe 東京 ✓", max: 64, want: "größe 東京 ✓"},
		{name: "empty", in: "", max: 64, want: ""},
		{name: "an escape sequence shows its ESC", in: "v1\x1b[2J\x1b]0;pwned\x07", max: 64, want: `v1\x1b[2J\x1b]0;pwned\x07`},
		{name: "every C0 control, tab and newline included", in: "a\x00b\tc\nd\re", max: 64, want: `a\x00b\x09c\x0ad\x0de`},
		{name: "DEL", in: "a\x7fb", max: 64, want: `a\x7fb`},
		{name: "C1 controls (CSI as one rune)", in: "a\u009b2Jb\u0085", max: 64, want: `a\u009b2Jb\u0085`},
		{name: "bidi overrides and isolates", in: "v1\u202egnp.exe\u2066x\u2069\u200f", max: 64, want: `v1\u202egnp.exe\u2066x\u2069\u200f`},
		{name: "zero-width and other invisible format characters", in: "a\u200bb\ufeffc\u00add\U000e0041", max: 64, want: `a\u200bb\ufeffc\u00add\U000e0041`},
		{name: "line separators and spaces other than ' '", in: "a\u2028b\u00a0c", max: 64, want: `a\u2028b\u00a0c`},
		{name: "bytes that are not UTF-8", in: "a\xffb\xc3", max: 64, want: `a\xffb\xc3`},
		{name: "exactly max bytes is not cut", in: "abcdef", max: 6, want: "abcdef"},
		{name: "one byte over max is cut and marked", in: "abcdefg", max: 6, want: "abc..."},
		{name: "a cut never splits a rune", in: "ab東京", max: 7, want: "ab..."},
		{name: "a cut never splits an escape", in: "ab\x1bcdefgh", max: 8, want: "ab..."},
		{name: "escapes count in the bound", in: "\x1b\x1b", max: 8, want: `\x1b\x1b`},
		{name: "escapes past the bound are cut", in: "\x1b\x1b\x1b", max: 8, want: `\x1b...`},
		{name: "no room for the marker", in: "abcdef", max: 2, want: "ab"},
		{name: "zero max", in: "abc", max: 0, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := v1alpha1.Printable(tc.in, tc.max)
			if got != tc.want {
				t.Errorf("Printable(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			assertPrintable(t, got, tc.max)
		})
	}
}

// A member's hostile version: a MiB of escape sequences and bidi overrides.
func TestPrintableBoundsHostileText(t *testing.T) {
	hostile := "v1.31.0" + strings.Repeat("\x1b[31m\u202e\x00\xff", 1<<20/10)
	for _, max := range []int{v1alpha1.MaxVersionLength, v1alpha1.MaxNameLength, v1alpha1.MaxMessageLength} {
		got := v1alpha1.Printable(hostile, max)
		assertPrintable(t, got, max)
		if !strings.HasPrefix(got, `v1.31.0\x1b[31m\u202e`) || !strings.HasSuffix(got, "...") {
			t.Errorf("Printable(hostile, %d) = %q, want its start escaped and a marked cut", max, got)
		}
	}
}

// TruncateMessage keeps every condition and Event message within 1 KiB
// (docs/registration.md, docs/member-health.md): a message of 1024 bytes once escaped is kept
// whole, one byte more is cut between runes or escapes to at most 1021
// bytes and marked "...", and hostile text comes out escaped.
func TestTruncateMessage(t *testing.T) {
	const bound = 1024 // the 1 KiB the docs state, not the constant
	if v1alpha1.MaxMessageLength != bound {
		t.Fatalf("MaxMessageLength = %d, want %d", v1alpha1.MaxMessageLength, bound)
	}
	a := func(n int) string { return strings.Repeat("a", n) }
	hostile, hostileWant := hostileMessage(bound)
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "empty", in: "", want: ""},
		{name: "a short message is kept", in: "cannot write Deployment: the member answered 500 InternalError",
			want: "cannot write Deployment: the member answered 500 InternalError"},
		{name: "1024 ASCII bytes are kept", in: a(bound), want: a(bound)},
		{name: "1025 ASCII bytes are cut to 1021 and marked", in: a(bound + 1), want: a(bound-3) + "..."},
		{name: "a MiB is cut the same", in: a(1 << 20), want: a(bound-3) + "..."},
		{name: "a 2-byte rune ending at the bound is kept", in: a(bound-2) + "é", want: a(bound-2) + "é"},
		{name: "a 3-byte rune ending at the bound is kept", in: a(bound-3) + "東", want: a(bound-3) + "東"},
		{name: "a 4-byte rune ending at the bound is kept", in: a(bound-4) + "🙂", want: a(bound-4) + "🙂"},
		{name: "a 3-byte rune across the bound is not split", in: a(bound-1) + "東", want: a(bound-3) + "..."},
		{name: "a rune across the marker's room is dropped whole", in: a(bound-4) + "東京", want: a(bound-4) + "..."},
		{name: "2-byte runes cut on a rune boundary", in: strings.Repeat("é", bound), want: strings.Repeat("é", (bound-3)/2) + "..."},
		{name: "an escape ending at the bound is kept", in: a(bound-4) + "\x1b", want: a(bound-4) + `\x1b`},
		{name: "an escape across the bound is not split", in: a(bound-3) + "\x1b", want: a(bound-3) + "..."},
		{name: "an escape across the marker's room is dropped whole", in: a(bound-6) + "\u202e\u202e", want: a(bound-6) + "..."},
		{name: "a byte that is not UTF-8 across the bound", in: a(bound-1) + "\xc3", want: a(bound-3) + "..."},
		{name: "newlines of a multi-line error are escaped", in: "line one\nline two\r\n", want: `line one\x0aline two\x0d\x0a`},
		{name: "a hostile MiB is escaped and cut between escapes", in: hostile, want: hostileWant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := v1alpha1.TruncateMessage(tc.in)
			if got != tc.want {
				t.Errorf("TruncateMessage(%d bytes) = %d bytes ...%q, want %d bytes ...%q", len(tc.in), len(got), tail(got), len(tc.want), tail(tc.want))
			}
			assertPrintable(t, got, bound)
		})
	}
}

// hostileMessage is a MiB of what a member could put in an error (an OSC 8
// link, escape sequences, bidi overrides, NUL, bytes that are not UTF-8,
// zero-width spaces) and what TruncateMessage must make of it within bound:
// the longest run of whole escapes and runes that leaves room for "...".
func hostileMessage(bound int) (in, want string) {
	escaped := map[string]string{"\x1b": `\x1b`, "\x07": `\x07`, "\n": `\x0a`, "\x00": `\x00`, "\xff": `\xff`, "\u202e": `\u202e`, "\u200b": `\u200b`}
	var b, w strings.Builder
	full := false
	add := func(piece string) {
		units := []string{piece}
		if _, ok := escaped[piece]; !ok {
			units = strings.Split(piece, "") // printable ASCII: a unit per byte
		}
		for _, u := range units {
			b.WriteString(u)
			e, ok := escaped[u]
			if !ok {
				e = u
			}
			if full = full || w.Len()+len(e) > bound-len("..."); !full {
				w.WriteString(e)
			}
		}
	}
	for _, p := range []string{"x509: valid for ", "\x1b", "]8;;http://evil", "\x07"} {
		add(p)
	}
	for b.Len() < 1<<20 {
		for _, p := range []string{"\x1b", "[2J", "\u202e", "\x00", "\xff", "\u200b", "\n"} {
			add(p)
		}
	}
	return b.String(), w.String() + "..."
}

// tail is the end of s, where a cut shows.
func tail(s string) string { return s[max(0, len(s)-24):] }

// assertPrintable fails unless s is within max bytes, valid UTF-8, and
// holds only what unicode.IsPrint calls printable.
func assertPrintable(t *testing.T, s string, max int) {
	t.Helper()
	if len(s) > max {
		t.Errorf("%d bytes, more than %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		t.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			t.Errorf("%q holds %U", s, r)
		}
	}
}

// Cut keeps whole runes, and cuts bytes that are not UTF-8 where n falls
// rather than dropping them all.
func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"aé", 2, "a"},
		{"aé", 3, "aé"},
		{strings.Repeat("\x80", 10), 4, "\x80\x80\x80\x80"},
	} {
		if got := v1alpha1.Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
