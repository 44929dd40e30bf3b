package members

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
)

// A refused answer gives the member its own reason, however deeply the
// refusal is wrapped (a sync timeout, net/http's url.Error).
func TestFailedNamesRefusedAnswers(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&url.Error{Op: "Get", URL: "https://m/version", Err: fmt.Errorf("%w: 4096 bytes", connect.ErrResponseTooLarge)}, v1alpha1.MemberResponseTooLargeReason},
		{fmt.Errorf("%w: Widget within 30s: %w", clusters.ErrSyncTimeout, connect.ErrResponseTooLarge), v1alpha1.MemberResponseTooLargeReason},
		{&url.Error{Op: "Post", URL: "https://m/api", Err: fmt.Errorf("%w: 307", connect.ErrRedirectRefused)}, v1alpha1.MemberRedirectRefusedReason},
		{fmt.Errorf("%w: Widget", clusters.ErrSyncTimeout), v1alpha1.MemberUnreachableReason},
	} {
		if got := failed(tc.err); got.reason != tc.want {
			t.Errorf("failed(%v).reason = %q, want %q", tc.err, got.reason, tc.want)
		}
		if got := failed(tc.err); tc.want != v1alpha1.MemberUnreachableReason && !stalledReasons[got.reason] {
			t.Errorf("failed(%v): %q is not a stalled reason", tc.err, got.reason)
		}
	}
}
