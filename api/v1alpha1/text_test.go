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

func TestTruncateMessage(t *testing.T) {
	short := "cannot write Deployment: the member answered 500 InternalError"
	if got := v1alpha1.TruncateMessage(short); got != short {
		t.Errorf("TruncateMessage(%q) = %q, want it unchanged", short, got)
	}
	long := strings.Repeat("é", v1alpha1.MaxMessageLength) // two bytes each
	got := v1alpha1.TruncateMessage(long)
	if len(got) > v1alpha1.MaxMessageLength || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("TruncateMessage(%d bytes) = %d bytes %q..., want at most %d valid bytes ending in ...",
			len(long), len(got), got[:16], v1alpha1.MaxMessageLength)
	}
	if want := strings.Repeat("é", (v1alpha1.MaxMessageLength-3)/2) + "..."; got != want {
		t.Errorf("TruncateMessage cut at %d bytes, want %d", len(got), len(want))
	}
	if got := v1alpha1.TruncateMessage("x509: certificate is valid for \x1b]8;;http://evil\x07here"); strings.ContainsRune(got, 0x1b) {
		t.Errorf("TruncateMessage kept an ESC: %q", got)
	}
}

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
