//go:build scenarios

package members_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// With renewal impossible, a member keeps working on its token until the
// member's API server refuses it, not a moment before, and
// CredentialsExpiring warned first. kube-apiserver issues no token for less
// than 10 minutes, so the test reissues join's token, signed with the
// member's own key, as if issued 10 minutes before it expires in 30 s; the
// API server accepts a token for a minute past its expiry (go-jose's leeway).
func TestUnrenewableTokenWorksUntilItExpires(t *testing.T) {
	g := NewWithT(t)
	member, _ := renewMember(t, renewShared)
	secret := joinRenewable(t, renewShared, "expiring-soon")
	token, _ := tokenOf(g, secret)
	hubtest.ExpectMemberReady(t, "expiring-soon", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	withoutRenewalRule(t, member)

	short, err := member.ReissueToken(token, time.Now().Add(30*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	fleet.HandOver(short)
	secret = hubSecret(g, "expiring-soon")
	secret.Data[registration.SecretKey] = bytes.ReplaceAll(secret.Data[registration.SecretKey], []byte(token), []byte(short))
	g.Expect(testFleet.Hub.Client.Update(context.Background(), secret)).To(Succeed())
	_, claims := tokenOf(g, secret)

	// The warning comes first: the renewal was due at once and fails.
	g.Eventually(func(g Gomega) {
		mc := hubtest.MemberCluster(g, "expiring-soon")
		g.Expect(mc.Status.TokenExpiry).NotTo(BeNil())
		g.Expect(mc.Status.TokenExpiry.Time).To(BeTemporally("==", claims.Expiry))
		cond := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberCredentialsExpiring)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Reason).To(Equal(v1alpha1.MemberRenewalFailedReason))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	warned := time.Now()
	g.Expect(warned).To(BeTemporally("<", claims.Expiry), "CredentialsExpiring warned before the token expired")

	// The member works on with the short token: a Widget is reconciled
	// and the member stays Ready until the API server refuses the token.
	key := hubtest.CreateShopWidget(t, member, "expiring-soon", 1)
	hubtest.ExpectReplicas(t, member, key, 1, time.Until(claims.Expiry))
	g.Expect(time.Now()).To(BeTemporally("<", claims.Expiry), "reconciled before the token expired")
	g.Consistently(func(g Gomega) {
		g.Expect(hubtest.ReadyConditionOf(hubtest.MemberCluster(g, "expiring-soon")).Status).To(Equal(metav1.ConditionTrue))
	}, time.Until(claims.Expiry), hubtest.Poll).Should(Succeed(), "Ready until the token expires")

	// Refused from a minute past expiry on: Unauthorized, said in the
	// conditions; the Widget and its Deployment stay.
	g.Eventually(func(g Gomega) {
		mc := hubtest.MemberCluster(g, "expiring-soon")
		ready := hubtest.ReadyConditionOf(mc)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(v1alpha1.MemberUnauthorizedReason))
		cond := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberCredentialsExpiring)
		g.Expect(cond.Message).To(ContainSubstring("expired at"))
		g.Expect(cond.Message).To(ContainSubstring("join --overwrite"))
		hubtest.ExpectNoneOf(t, "MemberCluster conditions", fmt.Sprint(mc.Status.Conditions), []string{token, short})
	}, time.Until(claims.Expiry)+time.Minute+2*hubtest.Within, hubtest.Poll).Should(Succeed())
	t.Logf("warned %s before expiry; Unauthorized %s after it", claims.Expiry.Sub(warned).Round(time.Second),
		time.Since(claims.Expiry).Round(time.Second))
	g.Expect(hubtest.Deployment(g, member, key).Spec.Replicas).To(Equal(ptr.To(int32(1))))
}
