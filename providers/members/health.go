package members

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
)

// observation is what one reconcile learned about a member: the Ready
// condition to show, the facts for the MemberCluster status, and how the
// reconcile ends.
type observation struct {
	ready   bool
	reason  string
	message string
	version string
	// widgets is the member's Widgets as counted from its cache;
	// unknownWidgets when they were not counted.
	widgets int32
	// tokenExpiry is the exp of the kubeconfig's token; zero when unknown.
	tokenExpiry time.Time
	// renewal is how the token's renewal stands (renew.go).
	renewal credentials
	// late is how much more than ProbeInterval passed since the member's
	// previous probe ended, up to one more ProbeInterval: how late the next
	// is expected to be too. Bounded, so that an overloaded hub writes
	// lastProbeTime at most one interval sooner for it, not at every probe.
	late time.Duration
	// written is the MemberCluster as this reconcile last wrote it, if it
	// did (recordEngaging): the hub's cache may not show that write yet.
	written *v1alpha1.MemberCluster
	result  reconcile.Result
	err     error
}

// requeueWithin makes the reconcile come back within d at the latest.
func (o *observation) requeueWithin(d time.Duration) {
	if d > 0 && (o.result.RequeueAfter == 0 || d < o.result.RequeueAfter) {
		o.result.RequeueAfter = d
	}
}

// probeBy brings the member's next probe forward, when it is due within one
// interval, to d from now, when lastProbeTime is due to be rewritten: so that
// the probe rewriting it is not the one after, up to an interval late. Not
// sooner than half an interval, which member.probe would answer from the
// last probe; and only a wait of at most an interval (the next probe of an
// engaged or parked member), not a longer one (MissingKindRetry,
// MaxRetryDelay) or a retry after an error.
func (o *observation) probeBy(d, interval time.Duration) {
	if o.err == nil && o.result.RequeueAfter > 0 && o.result.RequeueAfter <= interval {
		o.requeueWithin(max(d, interval/2))
	}
}

// minFailingWidgets is how many of a member's Widgets must fail their latest
// reconcile, and be more than half of its Widgets, for it to be Degraded.
const minFailingWidgets = 10

// degraded is the verdict on a member that answers its probes, failing of
// whose widgets failed their latest reconcile: judged afresh at each probe
// from the Widgets' current outcomes, not on attempts over a window, so one
// Widget retried at its backoff is one failing Widget, and the member is
// Engaged again as soon as its Widgets recover.
func degraded(failing int, widgets int32) bool {
	return failing >= minFailingWidgets && widgets >= 0 && failing*2 > int(widgets)
}

// failingWidgets is the set of a member's Widgets whose latest reconcile
// failed. A member's error rate counts Widgets, not attempts: one Widget
// retried at its backoff is one failing Widget, and one that has recovered,
// or was deleted (its last reconcile finds nothing and succeeds), leaves the
// set. The set never holds more Widgets than the member's cache does.
type failingWidgets struct {
	mu  sync.Mutex
	set map[types.NamespacedName]struct{}
}

func (f *failingWidgets) record(key types.NamespacedName, failed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !failed {
		delete(f.set, key)
		return
	}
	if f.set == nil {
		f.set = make(map[types.NamespacedName]struct{})
	}
	f.set[key] = struct{}{}
}

func (f *failingWidgets) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.set)
}

// reset forgets every outcome, for a member engaged afresh.
func (f *failingWidgets) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = nil
}

// failed turns an error from a member into the Ready condition to show. The
// message is the hub's own words: an answer of the member shows as its HTTP
// code and reason, never its body.
func failed(err error) observation {
	obs := observation{reason: v1alpha1.MemberUnreachableReason, message: withoutMemberText(err), err: err}
	switch {
	case errors.Is(err, connect.ErrDestinationRefused):
		obs.reason = v1alpha1.MemberUnsafeKubeconfigReason
		obs.message = "the server's address is refused: " + obs.message
		obs.err = reconcile.TerminalError(err)
	case errors.Is(err, connect.ErrResponseTooLarge):
		obs.reason = v1alpha1.MemberResponseTooLargeReason
		obs.message = "an answer of the member was larger than the hub accepts and was not read further: " + obs.message
	case errors.Is(err, connect.ErrRedirectRefused):
		obs.reason = v1alpha1.MemberRedirectRefusedReason
		obs.message = "the member answered with a redirect, which the hub never follows: " + obs.message
	case errors.Is(err, clusters.ErrTooManyObjects):
		obs.reason = v1alpha1.MemberTooManyObjectsReason
		obs.message = "the member's Widgets and Deployments are more than this hub holds per member (--member-max-objects): " + obs.message
	case errors.Is(err, clusters.ErrKindMissing):
		obs.reason = v1alpha1.MemberWidgetCRDMissingReason
		obs.message = "the member does not serve the Widget API (install the widgets.widgethub.io CRD there): " + obs.message
	case apierrors.IsUnauthorized(err):
		obs.reason = v1alpha1.MemberUnauthorizedReason
		obs.message = "the member rejects the kubeconfig's credentials (401): " + obs.message
	case apierrors.IsForbidden(err):
		obs.reason = v1alpha1.MemberForbiddenReason
		obs.message = "the member forbids what widgethub needs (403; grant config/member-rbac): " + obs.message
	}
	return obs
}

// withoutMemberText is err's message with the member's own words (the message
// or body of an API error) replaced by the HTTP code and reason, made
// printable and bounded as a condition's message (v1alpha1.TruncateMessage):
// other errors may still quote the member (a certificate's names, say).
func withoutMemberText(err error) string {
	return v1alpha1.TruncateMessage(replaceAnswer(err))
}

func replaceAnswer(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err.Error()
	}
	s := status.Status()
	answer := fmt.Sprintf("the member answered %d %s", s.Code, s.Reason)
	// The wrapping words are the hub's: keep them around the answer.
	msg := err.Error()
	if se, ok := status.(error); ok {
		if before, after, found := strings.Cut(msg, se.Error()); found {
			return before + answer + after
		}
	}
	return answer
}
