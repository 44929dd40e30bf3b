package clusters

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// Text a member chose (its names, images, errors) is data: what the hub
// records or logs of it is printable and bounded (v1alpha1.Printable).

// PrintableRecorder returns a recorder that sends each Event's note through
// next made printable and bounded (v1alpha1.TruncateMessage): notes quote
// what members chose (names, images, errors), and an API server refuses a
// note longer than 1 KiB.
func PrintableRecorder(next events.EventRecorder) events.EventRecorder {
	return printableRecorder{next: next}
}

type printableRecorder struct{ next events.EventRecorder }

func (r printableRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.next.Eventf(regarding, related, eventtype, reason, action, "%s", v1alpha1.TruncateMessage(fmt.Sprintf(note, args...)))
}

// PrintableError keeps err, which may quote a member, for errors.Is and
// errors.As, but shows its message printable and bounded
// (v1alpha1.TruncateMessage) wherever it is printed: a reconciler returns
// it, and controller-runtime logs it. It returns nil for nil.
func PrintableError(err error) error {
	if err == nil {
		return nil
	}
	return printableError{err}
}

type printableError struct{ err error }

func (e printableError) Error() string { return v1alpha1.TruncateMessage(e.err.Error()) }
func (e printableError) Unwrap() error { return e.err }
