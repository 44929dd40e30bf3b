package clusters_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
)

// An Event's note quotes what members chose (a Widget's name or image, an
// error): PrintableRecorder passes it on printable and within the API
// server's 1 KiB, formatted once.
func TestPrintableRecorderBoundsNotes(t *testing.T) {
	fake := events.NewFakeRecorder(2)
	r := clusters.PrintableRecorder(fake)
	r.Eventf(nil, nil, corev1.EventTypeNormal, "DeploymentCreated", "Apply", "Created Deployment %s with %d replicas of %s",
		"cart", 2, "registry.k8s.io/pause:3.10")
	r.Eventf(nil, nil, corev1.EventTypeWarning, "DeploymentFailed", "Reconcile", "%s", "image \x1b]0;owned\x07"+strings.Repeat("\u202e", 2048))
	for _, want := range []string{
		"Normal DeploymentCreated Created Deployment cart with 2 replicas of registry.k8s.io/pause:3.10",
		"Warning DeploymentFailed image " + `\x1b]0;owned\x07\u202e`,
	} {
		got := <-fake.Events
		note := strings.SplitN(got, " ", 3)[2]
		if !strings.HasPrefix(got, want) || len(note) > v1alpha1.MaxMessageLength || strings.ContainsAny(note, "\x1b\x07\u202e") {
			t.Errorf("recorded %q (%d bytes), want %q..., printable, within %d bytes", got, len(note), want, v1alpha1.MaxMessageLength)
		}
	}
}

// A reconcile error that quotes a member is logged printable and bounded,
// and stays what it was for errors.Is and errors.As (a terminal error stays
// terminal).
func TestPrintableErrorKeepsTheError(t *testing.T) {
	if clusters.PrintableError(nil) != nil {
		t.Fatal("PrintableError(nil) is not nil")
	}
	cause := errors.New("the member says \x1b]0;owned\x07" + strings.Repeat("\u202e", 2048))
	err := clusters.PrintableError(reconcile.TerminalError(fmt.Errorf("engage member %q: %w", "m", cause)))
	if msg := err.Error(); len(msg) > v1alpha1.MaxMessageLength || strings.ContainsAny(msg, "\x1b\x07\u202e") ||
		!strings.HasPrefix(msg, `terminal error: engage member "m": the member says \x1b]0;owned\x07\u202e`) {
		t.Errorf("Error() = %q (%d bytes), want it printable within %d bytes", msg, len(msg), v1alpha1.MaxMessageLength)
	}
	if !errors.Is(err, cause) || !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("errors.Is no longer sees the cause or the terminal error through %T", err)
	}
}
