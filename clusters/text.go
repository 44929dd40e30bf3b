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
