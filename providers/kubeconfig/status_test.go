package kubeconfig

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

func TestSetTokenExpiry(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name       string
		expiry     time.Time
		wantStatus metav1.ConditionStatus // "" means no condition
		wantReason string
	}{
		{"unknown", time.Time{}, "", ""},
		{"a year left", now.Add(365 * day), metav1.ConditionFalse, v1alpha1.MemberTokenValidReason},
		{"just over the warning", now.Add(v1alpha1.TokenExpiryWarning + time.Second), metav1.ConditionFalse, v1alpha1.MemberTokenValidReason},
		{"just under the warning", now.Add(v1alpha1.TokenExpiryWarning - time.Second), metav1.ConditionTrue, v1alpha1.MemberTokenExpiresSoonReason},
		{"an hour left", now.Add(time.Hour), metav1.ConditionTrue, v1alpha1.MemberTokenExpiresSoonReason},
		{"expired", now.Add(-time.Hour), metav1.ConditionTrue, v1alpha1.MemberTokenExpiresSoonReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A condition and expiry from an earlier token are replaced.
			status := v1alpha1.MemberClusterStatus{TokenExpiry: &metav1.Time{Time: now.Add(-99 * day)}}
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.MemberTokenExpiring, Status: metav1.ConditionUnknown, Reason: "Old"})
			setTokenExpiry(&status, tc.expiry, now)
			cond := meta.FindStatusCondition(status.Conditions, v1alpha1.MemberTokenExpiring)
			if tc.wantStatus == "" {
				if cond != nil || status.TokenExpiry != nil {
					t.Fatalf("unknown expiry left %+v and %v", cond, status.TokenExpiry)
				}
				return
			}
			if cond == nil || cond.Status != tc.wantStatus || cond.Reason != tc.wantReason {
				t.Fatalf("condition %+v, want %s/%s", cond, tc.wantStatus, tc.wantReason)
			}
			if status.TokenExpiry == nil || !status.TokenExpiry.Time.Equal(tc.expiry) {
				t.Fatalf("tokenExpiry %v, want %v", status.TokenExpiry, tc.expiry)
			}
		})
	}
}
