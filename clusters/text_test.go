package clusters_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

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
