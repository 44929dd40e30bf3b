package members

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/providers/sharding"
)

// CredentialsExpiring warns of a token the hub does not renew from the
// warning window on, and of one it renews only while its renewal fails.
func TestSetCredentialsExpiring(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	warning := v1alpha1.TokenExpiryWarning
	renewable := credentials{renewable: true, renewAt: now.Add(-time.Hour)}
	implausible := credentials{renewable: true, renewAt: now.Add(time.Hour), implausible: "the token claims to be issued at 2026-11-13T12:00:00Z"}
	failing := credentials{renewable: true, renewAt: now.Add(-time.Hour), failure: "the member answered 403 Forbidden"}
	for _, tc := range []struct {
		name       string
		expiry     time.Time
		creds      credentials
		wantStatus metav1.ConditionStatus // "" means no condition
		wantReason string
		wantSaying string // part of the message, when not ""
	}{
		{"unknown", time.Time{}, credentials{}, "", "", ""},
		{"unknown, renewable", time.Time{}, failing, "", "", ""},
		{"a year left", now.Add(365 * day), credentials{}, metav1.ConditionFalse, v1alpha1.MemberCredentialsValidReason, ""},
		{"just over the warning", now.Add(warning + time.Second), credentials{}, metav1.ConditionFalse, v1alpha1.MemberCredentialsValidReason, ""},
		{"just under the warning", now.Add(warning - time.Second), credentials{}, metav1.ConditionTrue, v1alpha1.MemberCredentialsExpiresSoonReason, ""},
		{"an hour left", now.Add(time.Hour), credentials{}, metav1.ConditionTrue, v1alpha1.MemberCredentialsExpiresSoonReason, ""},
		{"expired", now.Add(-time.Hour), credentials{}, metav1.ConditionTrue, v1alpha1.MemberCredentialsExpiresSoonReason, ""},
		{"renewable, an hour left", now.Add(time.Hour), renewable, metav1.ConditionFalse, v1alpha1.MemberCredentialsRenewableReason, ""},
		{"renewable, renewal failing", now.Add(3 * day), failing, metav1.ConditionTrue, v1alpha1.MemberRenewalFailedReason, "keeps using it until it expires"},
		{"renewable, renewal failed, expired", now.Add(-time.Minute), failing, metav1.ConditionTrue, v1alpha1.MemberRenewalFailedReason, "expired at 2026-11-23T11:59:00Z"},
		{"the hub's, implausible claims", now.Add(time.Hour), implausible, metav1.ConditionTrue, v1alpha1.MemberImplausibleTokenReason, "renews it on its own clock"},
		{"not renewed, implausible claims", now.Add(time.Hour), credentials{implausible: "the token claims to be issued in the future"},
			metav1.ConditionTrue, v1alpha1.MemberImplausibleTokenReason, "issued in the future; renew it with kubectl widgethub join --overwrite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A condition and expiry from an earlier token are replaced,
			// and the condition CredentialsExpiring replaced is removed.
			status := v1alpha1.MemberClusterStatus{TokenExpiry: &metav1.Time{Time: now.Add(-99 * day)}}
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.MemberCredentialsExpiring, Status: metav1.ConditionUnknown, Reason: "Old"})
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: "TokenExpiring", Status: metav1.ConditionTrue, Reason: "ExpiresSoon"})
			expiring := setCredentialsExpiring(&status, tc.expiry, tc.creds, warning, now)
			if meta.FindStatusCondition(status.Conditions, "TokenExpiring") != nil {
				t.Errorf("the legacy TokenExpiring condition is left")
			}
			cond := meta.FindStatusCondition(status.Conditions, v1alpha1.MemberCredentialsExpiring)
			if tc.wantStatus == "" {
				if cond != nil || status.TokenExpiry != nil || expiring {
					t.Fatalf("unknown expiry left %+v and %v (expiring %v)", cond, status.TokenExpiry, expiring)
				}
				return
			}
			if cond == nil || cond.Status != tc.wantStatus || cond.Reason != tc.wantReason {
				t.Fatalf("condition %+v, want %s/%s", cond, tc.wantStatus, tc.wantReason)
			}
			if !strings.Contains(cond.Message, tc.wantSaying) {
				t.Errorf("message %q does not say %q", cond.Message, tc.wantSaying)
			}
			if expiring != (tc.wantStatus == metav1.ConditionTrue) {
				t.Errorf("returned %v with condition %s", expiring, cond.Status)
			}
			if status.TokenExpiry == nil || !status.TokenExpiry.Time.Equal(tc.expiry) {
				t.Fatalf("tokenExpiry %v, want %v", status.TokenExpiry, tc.expiry)
			}
		})
	}
}

// Each Ready reason of a member maps to one kstatus status, as the kstatus
// library (Flux, kpt, Helm) computes it from the conditions setProgress
// leaves, whatever conditions an earlier state left.
func TestSetProgress(t *testing.T) {
	for _, tc := range []struct {
		reason   string
		ready    bool
		wantType string // the True one of Reconciling and Stalled; "" for neither
		want     kstatus.Status
	}{
		{v1alpha1.MemberEngagedReason, true, "", kstatus.CurrentStatus},
		{v1alpha1.MemberUnreachableReason, false, v1alpha1.MemberReconciling, kstatus.InProgressStatus},
		{v1alpha1.MemberInvalidKubeconfigReason, false, v1alpha1.MemberStalled, kstatus.FailedStatus},
		{v1alpha1.MemberExecPluginRefusedReason, false, v1alpha1.MemberStalled, kstatus.FailedStatus},
		{v1alpha1.MemberUnsafeKubeconfigReason, false, v1alpha1.MemberStalled, kstatus.FailedStatus},
		{v1alpha1.MemberUnauthorizedReason, false, v1alpha1.MemberStalled, kstatus.FailedStatus},
		{v1alpha1.MemberForbiddenReason, false, v1alpha1.MemberStalled, kstatus.FailedStatus},
		{v1alpha1.MemberWidgetCRDMissingReason, false, v1alpha1.MemberStalled, kstatus.FailedStatus},
		{v1alpha1.MemberDegradedReason, false, v1alpha1.MemberStalled, kstatus.FailedStatus},
	} {
		for _, earlier := range []string{v1alpha1.MemberReconciling, v1alpha1.MemberStalled} {
			t.Run(tc.reason+" after "+earlier, func(t *testing.T) {
				mc := &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1}}
				conds := &mc.Status.Conditions
				meta.SetStatusCondition(conds, metav1.Condition{Type: earlier, Status: metav1.ConditionTrue, Reason: "Earlier"})
				ready := metav1.Condition{Type: v1alpha1.MemberReady, Status: metav1.ConditionFalse, Reason: tc.reason, Message: "why"}
				if tc.ready {
					ready.Status = metav1.ConditionTrue
				}
				meta.SetStatusCondition(conds, ready)
				setProgress(conds, tc.ready, tc.reason, "why")
				for _, condType := range []string{v1alpha1.MemberReconciling, v1alpha1.MemberStalled} {
					c := meta.FindStatusCondition(*conds, condType)
					switch {
					case condType != tc.wantType && c != nil:
						t.Errorf("%s = %+v, want it absent", condType, c)
					case condType == tc.wantType && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.reason || c.Message != "why"):
						t.Errorf("%s = %+v, want True/%s", condType, c, tc.reason)
					}
				}
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mc)
				if err != nil {
					t.Fatal(err)
				}
				res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != tc.want {
					t.Errorf("kstatus says %s (%s), want %s", res.Status, res.Message, tc.want)
				}
			})
		}
	}
}

func TestFirstAttempt(t *testing.T) {
	withReady := func(reason string) *v1alpha1.MemberCluster {
		mc := &v1alpha1.MemberCluster{}
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: v1alpha1.MemberReady, Status: metav1.ConditionFalse, Reason: reason})
		return mc
	}
	for _, tc := range []struct {
		mc   *v1alpha1.MemberCluster
		want bool
	}{
		{&v1alpha1.MemberCluster{}, true},
		{withReady(v1alpha1.MemberInvalidKubeconfigReason), true},
		{withReady(v1alpha1.MemberExecPluginRefusedReason), true},
		{withReady(v1alpha1.MemberUnsafeKubeconfigReason), true},
		// Retried with the same kubeconfig: no Engaging write per retry.
		{withReady(v1alpha1.MemberUnreachableReason), false},
		{withReady(v1alpha1.MemberWidgetCRDMissingReason), false},
		{withReady(v1alpha1.MemberUnauthorizedReason), false},
		{withReady(v1alpha1.MemberForbiddenReason), false},
		{withReady(v1alpha1.MemberEngagedReason), false},
	} {
		if got := firstAttempt(tc.mc); got != tc.want {
			t.Errorf("firstAttempt(%v) = %v, want %v", tc.mc.Status.Conditions, got, tc.want)
		}
	}
}

// A pinned member's MemberCluster says whether its pin is followed, and why
// not, and which replica serves it; a member without a pin, or a hub without
// sharding, shows nothing.
func TestOwnershipReport(t *testing.T) {
	shards, err := sharding.New(sharding.Options{Namespace: "widgethub-system", ReplicaID: "a"}, nil, nil, nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	sharded := &sharded{shards: shards, assigned: &assignment{
		pins: map[string]string{"kept": "a", "over": "a", "gone": "z", "free": ""},
		unpinned: map[string]sharding.Unpinned{
			"over": {Reason: sharding.PinBeyondFairShare, Share: 20},
			"gone": {Reason: sharding.PinReplicaNotLive},
		},
	}}
	for _, tc := range []struct {
		member, wantStatus, wantReason, wantSaying string
	}{
		{"kept", "True", v1alpha1.MemberPinHonouredReason, `pinned to "a"`},
		{"over", "False", v1alpha1.MemberPinBeyondFairShareReason, "fair share of 20 members"},
		{"gone", "False", v1alpha1.MemberPinnedReplicaNotLiveReason, "not live"},
		{"free", "", "", ""},
	} {
		status := v1alpha1.MemberClusterStatus{}
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.MemberPinned, Status: metav1.ConditionUnknown, Reason: "Old"})
		sharded.report(&status, tc.member)
		if status.ServedBy != "a" {
			t.Errorf("%s: servedBy %q, want the replica a", tc.member, status.ServedBy)
		}
		cond := meta.FindStatusCondition(status.Conditions, v1alpha1.MemberPinned)
		switch {
		case tc.wantStatus == "" && cond != nil:
			t.Errorf("%s: condition %+v for a member without a pin", tc.member, cond)
		case tc.wantStatus == "":
		case cond == nil || string(cond.Status) != tc.wantStatus || cond.Reason != tc.wantReason || !strings.Contains(cond.Message, tc.wantSaying):
			t.Errorf("%s: condition %+v, want %s/%s saying %q", tc.member, cond, tc.wantStatus, tc.wantReason, tc.wantSaying)
		}
	}
	status := v1alpha1.MemberClusterStatus{ServedBy: "a"}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.MemberPinned, Status: metav1.ConditionTrue, Reason: "Old"})
	if (everything{}).report(&status, "kept"); len(status.Conditions) != 0 || status.ServedBy != "" {
		t.Errorf("without sharding: servedBy %q, %+v", status.ServedBy, status.Conditions)
	}
}
