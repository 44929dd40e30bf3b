package connect

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// memberWarnings handles the warnings a member's answers carry (the Warning
// header: deprecations, its admission webhooks' words) as the member's
// text: it logs each printable and bounded (v1alpha1.MaxMessageLength),
// through the logger of the request's context. client-go's and
// controller-runtime's own handlers log a warning whole, as long as the
// member's headers may be (10 MiB), with the bidirectional and other
// invisible characters it holds.
type memberWarnings struct{}

func (memberWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	klog.FromContext(ctx).Info("Member answered with a warning", "warning", v1alpha1.Printable(text, v1alpha1.MaxMessageLength))
}
