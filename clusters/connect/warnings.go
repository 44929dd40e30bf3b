package connect

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// WarningLogger handles the warnings a member's answers carry (the Warning
// header: deprecations, its admission webhooks' words) as the member's
// text: it logs each to log, printable and bounded
// (v1alpha1.MaxMessageLength). With the zero logr.Logger it logs through the
// logger of the request's context; every config RESTConfig makes has that
// one, and a client that knows the member's name sets its own.
// client-go's and controller-runtime's handlers log a warning whole, as long
// as the member's headers may be (10 MiB), with the bidirectional and other
// invisible characters it holds.
func WarningLogger(log logr.Logger) rest.WarningHandlerWithContext {
	return memberWarnings{log: log}
}

type memberWarnings struct{ log logr.Logger }

func (w memberWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	log := w.log
	if log.GetSink() == nil {
		log = klog.FromContext(ctx)
	}
	log.Info("Member answered with a warning", "warning", v1alpha1.Printable(text, v1alpha1.MaxMessageLength))
}
