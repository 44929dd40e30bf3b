package v1alpha1_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// A reconcile error that quotes a member is logged printable and bounded,
// and stays what it was for errors.Is and errors.As (a terminal error stays
// terminal).
func TestPrintableErrorKeepsTheError(t *testing.T) {
	if v1alpha1.PrintableError(nil) != nil {
		t.Fatal("PrintableError(nil) is not nil")
	}
	cause := errors.New("the member says \x1b]0;owned\x07" + strings.Repeat("\u202e", 2048))
	err := v1alpha1.PrintableError(reconcile.TerminalError(fmt.Errorf("engage member %q: %w", "m", cause)))
	if msg := err.Error(); len(msg) > v1alpha1.MaxMessageLength || strings.ContainsAny(msg, "\x1b\x07\u202e") ||
		!strings.HasPrefix(msg, `terminal error: engage member "m": the member says \x1b]0;owned\x07\u202e`) {
		t.Errorf("Error() = %q (%d bytes), want it printable within %d bytes", msg, len(msg), v1alpha1.MaxMessageLength)
	}
	if !errors.Is(err, cause) || !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("errors.Is no longer sees the cause or the terminal error through %T", err)
	}
}
