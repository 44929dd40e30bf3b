package members_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/cmd/kubectl-widgethub/plugin"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	"github.com/widgethub/widgethub/providers/members"
)

// The suite's manager renews a token that join minted once less than
// renewRemaining of its lifetime is left: 12 s into a 10-minute token (the
// API server's shortest), so that a test sees renewals within seconds.
const renewRemaining = 0.98

// renewMinInterval is the suite's least time between two renewals of a
// member's token, shorter than the 12 s above so that it shows only where a
// member's tokens claim to be due sooner.
const renewMinInterval = 10 * time.Second

// The members of the renewal tests, joined with kubectl widgethub join:
// renewShared, and one of its own for each test that runs beside the
// others and would see them at a shared one. TestRenewTokenInPlace counts
// the requests of the hub's caches at its member, where any other join adds
// some; TestRenewalFailureKeepsMemberWorking takes the renewal rule away
// from its member's role, which any other join puts back.
const (
	renewShared  = "renew"
	renewInPlace = "renew-in-place"
	renewFailure = "renew-failure"
)

var (
	renewMembers   = &hubtest.LateMembers{Names: []string{renewShared, renewInPlace, renewFailure}, Audit: true}
	renewFilesOnce sync.Once
	renewFiles     *fleet.KubeconfigFiles
	renewFilesErr  error
)

// renewMember returns the renewal member called name, and kubeconfig files
// with the contexts of the hub and every member (for kubectl widgethub).
// It starts the renewal members at the first call: call it before
// t.Parallel.
func renewMember(t *testing.T, name string) (*fleet.ControlPlane, *fleet.KubeconfigFiles) {
	t.Helper()
	plane := renewMembers.Get(t, name)
	renewFilesOnce.Do(func() {
		var dir string
		if dir, renewFilesErr = os.MkdirTemp("", "widgethub-renew-"); renewFilesErr == nil {
			renewFiles, renewFilesErr = testFleet.WriteKubeconfigs(dir)
		}
	})
	if renewFilesErr != nil {
		t.Fatal(renewFilesErr)
	}
	return plane, renewFiles
}

// kubectlWidgethub runs the plugin against the suite's hub and fails the test
// unless it exits 0.
func kubectlWidgethub(t *testing.T, files *fleet.KubeconfigFiles, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append([]string{"--kubeconfig", files.All, "--context", "hub"}, args...)
	if code := plugin.Run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("kubectl widgethub %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
}

// joinRenewable joins the member called member (see renewMember) as name
// with a 10-minute token and unjoins it (revoking its tokens) when the test
// ends.
func joinRenewable(t *testing.T, member, name string) *corev1.Secret {
	t.Helper()
	_, files := renewMember(t, member)
	kubectlWidgethub(t, files, "join", name, "--member-context", member, "--token-ttl", "10m")
	t.Cleanup(func() { kubectlWidgethub(t, files, "unjoin", name, "--member-context", member) })
	secret := hubSecret(NewWithT(t), name)
	fleet.HandOverKubeconfig(secret.Data[registration.SecretKey])
	return secret
}

func hubSecret(g Gomega, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: name}, s)).To(Succeed())
	return s
}

// tokenOf is the bearer token of a registration Secret's kubeconfig and its claims.
func tokenOf(g Gomega, s *corev1.Secret) (string, connect.TokenClaims) {
	cfg, err := connect.RESTConfig(s.Data[registration.SecretKey], connect.ConfigOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	claims, ok := connect.ParseTokenClaims(cfg.REST.BearerToken)
	g.Expect(ok).To(BeTrue(), "a ServiceAccount token")
	return cfg.REST.BearerToken, claims
}

// cacheRequests counts the requests of the hub's caches for the Widgets and
// Deployments of the member: the lists and watches of the hub's identity,
// but the probes' lists of one object. The audit log records a watch when it
// ends: a member whose caches are rebuilt shows the watches of the old ones
// (and, without watch-list, the lists of the new ones).
func cacheRequests(g Gomega, cp *fleet.ControlPlane) int {
	reads, err := cp.Reads()
	g.Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, r := range reads {
		if r.User == "system:serviceaccount:"+plugin.MemberNamespace+":"+plugin.MemberServiceAccount &&
			(r.Resource == "widgets" || r.Resource == "deployments") && !strings.Contains(r.URI, "limit=1&") && !strings.HasSuffix(r.URI, "limit=1") {
			n++
		}
	}
	return n
}

// credentialsExpiring is the CredentialsExpiring condition of name's MemberCluster.
func credentialsExpiring(g Gomega, name string) *metav1.Condition {
	cond := meta.FindStatusCondition(hubtest.MemberCluster(g, name).Status.Conditions, v1alpha1.MemberCredentialsExpiring)
	g.Expect(cond).NotTo(BeNil(), "MemberCluster %s has a CredentialsExpiring condition", name)
	return cond
}

// A member that join registered gets a new token from the hub before its
// own expires: same ServiceAccount, same bound Secret, same lifetime,
// written into the registration and swapped into the engaged member in
// place. The member's Widgets are reconciled across the renewals, and its
// API server serves no new LIST or WATCH of them: no relist.
func TestRenewTokenInPlace(t *testing.T) {
	member, _ := renewMember(t, renewInPlace)
	t.Parallel()
	g := NewWithT(t)
	start := time.Now()
	secret := joinRenewable(t, renewInPlace, "renewed")
	oldToken, old := tokenOf(g, secret)
	g.Expect(old.Lifetime()).To(Equal(10 * time.Minute))
	hubtest.ExpectMemberReady(t, "renewed", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	key := hubtest.CreateShopWidget(t, member, "renewed", 1)
	hubtest.ExpectReplicas(t, member, key, 1, hubtest.Within)
	g.Eventually(func(g Gomega) {
		cond := credentialsExpiring(g, "renewed")
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(v1alpha1.MemberCredentialsRenewableReason))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	cachesBefore := cacheRequests(g, member)

	// Renewed once 2% of 10 minutes are gone: about 12 s after join.
	var renewed *corev1.Secret
	g.Eventually(func(g Gomega) {
		renewed = hubSecret(g, "renewed")
		token, _ := tokenOf(g, renewed)
		g.Expect(token).NotTo(Equal(oldToken), "the registration holds a renewed token")
	}, time.Duration(float64(old.Lifetime())*(1-renewRemaining))+hubtest.Within, hubtest.Poll).Should(Succeed())
	renewedAt := time.Now()
	newToken, claims := tokenOf(g, renewed)
	fleet.HandOver(newToken)
	t.Logf("renewed %s after join (due %s after)", renewedAt.Sub(start).Round(time.Millisecond),
		time.Duration(float64(old.Lifetime())*(1-renewRemaining)))
	g.Expect(claims.ServiceAccount).To(Equal(old.ServiceAccount))
	g.Expect(claims.Namespace).To(Equal(old.Namespace))
	g.Expect(claims.Secret).To(Equal(old.Secret), "bound to the same Secret: unjoin revokes both")
	g.Expect(claims.SecretUID).To(Equal(old.SecretUID))
	g.Expect(claims.Lifetime()).To(Equal(old.Lifetime()), "the same lifetime")
	g.Expect(claims.IssuedAt).To(BeTemporally(">=", old.IssuedAt))
	// Only the token changed: server, CA, user, context, labels; the
	// annotations gained the hub's record of the token it asked for.
	g.Expect(bytes.ReplaceAll(renewed.Data[registration.SecretKey], []byte(newToken), []byte(oldToken))).To(Equal(secret.Data[registration.SecretKey]))
	issued := renewed.Annotations[registration.TokenIssuedAnnotation]
	g.Expect(issued).To(MatchRegexp(`^minted=\S+ lifetime=600s token=` + members.TokenDigest(newToken) + `$`))
	delete(renewed.Annotations, registration.TokenIssuedAnnotation)
	g.Expect(renewed.Annotations).To(Equal(secret.Annotations))
	g.Expect(renewed.Labels).To(Equal(secret.Labels))
	// The old token is not revoked (it is bound to the same Secret); it
	// expires at most one lifetime after it was minted, and was renewed
	// with about renewRemaining of it left.
	g.Expect(old.Expiry.Sub(renewedAt)).To(BeNumerically("<=", old.Lifetime()))

	// The member shows the new token's expiry, and swapped it in place.
	g.Eventually(func(g Gomega) {
		mc := hubtest.MemberCluster(g, "renewed")
		g.Expect(mc.Status.TokenExpiry).NotTo(BeNil())
		g.Expect(mc.Status.TokenExpiry.Time).To(BeTemporally("==", claims.Expiry))
		g.Expect(hubtest.ReadyConditionOf(mc).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(hubtest.Logs.String()).To(MatchRegexp(`Swapped the member's token in place.*"cluster": "renewed"`))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	hubtest.SetReplicas(t, member, key, 2)
	hubtest.ExpectReplicas(t, member, key, 2, hubtest.Within)
	// And renews again, 12 s later.
	g.Eventually(func(g Gomega) {
		token, _ := tokenOf(g, hubSecret(g, "renewed"))
		g.Expect(token).NotTo(BeElementOf(oldToken, newToken))
		fleet.HandOver(token)
	}, time.Duration(float64(old.Lifetime())*(1-renewRemaining))+hubtest.Within, hubtest.Poll).Should(Succeed())
	hubtest.SetReplicas(t, member, key, 3)
	hubtest.ExpectReplicas(t, member, key, 3, hubtest.Within)
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Logs.String()).To(MatchRegexp(`(?s)Swapped the member's token in place.*"cluster": "renewed".*Swapped the member's token in place.*"cluster": "renewed"`))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	cachesAfter := cacheRequests(g, member)
	g.Expect(cachesAfter).To(Equal(cachesBefore), "lists and ended watches of the hub's caches at the member across the renewals")
	t.Logf("across two renewals the member's audit log shows %d new lists or ended watches of the hub's caches (%d before)",
		cachesAfter-cachesBefore, cachesBefore)

	// A Normal Event says so, without a credential.
	g.Eventually(func(g Gomega) {
		var found bool
		for _, e := range hubtest.SecretEventsV1(g, "renewed") {
			hubtest.ExpectNoneOf(t, "Event "+e.Reason, e.Note, []string{oldToken, newToken})
			found = found || (e.Reason == "TokenRenewed" && e.Type == corev1.EventTypeNormal)
		}
		g.Expect(found).To(BeTrue(), "a Normal TokenRenewed Event on the Secret")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	expiry, ok := hubtest.Gauge(g, "widgethub_member_credentials_expiry_timestamp_seconds", "renewed")
	g.Expect(ok).To(BeTrue())
	g.Expect(expiry).To(BeNumerically(">", float64(old.Expiry.Unix())))

	// The count sees a rebuild: a change of the TLS server name engages
	// the member afresh, and the old caches' watches end.
	current := hubSecret(g, "renewed")
	current.Data[registration.SecretKey] = hubtest.EditKubeconfig(t, current.Data[registration.SecretKey], func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.TLSServerName = "localhost"
	})
	g.Expect(testFleet.Hub.Client.Update(context.Background(), current)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(cacheRequests(g, member)).To(BeNumerically(">", cachesAfter))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "a re-engagement shows in the audit log")
}

// With the rule that allows the renewal removed from the member role, the
// member keeps working with its current token (Ready, Widgets reconciled,
// registration untouched) while CredentialsExpiring, the metrics and a
// Warning Event say that the renewal fails, long before the token expires;
// with the rule back, the next attempt renews it.
func TestRenewalFailureKeepsMemberWorking(t *testing.T) {
	member, _ := renewMember(t, renewFailure)
	t.Parallel()
	g := NewWithT(t)
	secret := joinRenewable(t, renewFailure, "unrenewable")
	token, claims := tokenOf(g, secret)
	hubtest.ExpectMemberReady(t, "unrenewable", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	// Take the rule away before the renewal is due.
	restore := withoutRenewalRule(t, member)
	removed := time.Now()
	g.Expect(removed).To(BeTemporally("<", claims.IssuedAt.Add(time.Duration(float64(claims.Lifetime())*(1-renewRemaining)))),
		"the rule was removed before the renewal was due")

	g.Eventually(func(g Gomega) {
		cond := credentialsExpiring(g, "unrenewable")
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(cond.Reason).To(Equal(v1alpha1.MemberRenewalFailedReason))
		g.Expect(cond.Message).To(ContainSubstring("403 Forbidden"))
		v, ok := hubtest.Gauge(g, "widgethub_member_credentials_expiring", "unrenewable")
		g.Expect(ok && v == 1).To(BeTrue(), "widgethub_member_credentials_expiring is 1")
		v, _ = hubtest.Gauge(g, "widgethub_member_credentials_renewal_failures_total", "unrenewable")
		g.Expect(v).To(BeNumerically(">=", 1))
	}, 2*hubtest.Within, hubtest.Poll).Should(Succeed())
	t.Logf("CredentialsExpiring=True %s after the rule was removed, %s before the token expires",
		time.Since(removed).Round(time.Millisecond), time.Until(claims.Expiry).Round(time.Second))

	// The member works on with its current token.
	key := hubtest.CreateShopWidget(t, member, "unrenewable", 2)
	hubtest.ExpectReplicas(t, member, key, 2, hubtest.Within)
	mc := hubtest.ExpectMemberReady(t, "unrenewable", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Expect(mc.Status.TokenExpiry.Time).To(BeTemporally("==", claims.Expiry))
	still := hubSecret(g, "unrenewable")
	g.Expect(still.Data).To(Equal(secret.Data), "the registration keeps its token")
	g.Eventually(func(g Gomega) {
		var warned bool
		for _, e := range hubtest.SecretEventsV1(g, "unrenewable") {
			hubtest.ExpectNoneOf(t, "Event "+e.Reason, e.Note, []string{token})
			warned = warned || (e.Reason == v1alpha1.MemberRenewalFailedReason && e.Type == corev1.EventTypeWarning)
		}
		g.Expect(warned).To(BeTrue(), "a Warning RenewalFailed Event on the Secret")
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	// Retried with backoff, not in a loop: 10 s, then 20 s.
	failures, _ := hubtest.Gauge(g, "widgethub_member_credentials_renewal_failures_total", "unrenewable")
	g.Expect(failures).To(BeNumerically("<=", 1+time.Since(removed)/(10*time.Second)))

	// The rule back: the next attempt renews the token.
	restore()
	g.Eventually(func(g Gomega) {
		renewed, _ := tokenOf(g, hubSecret(g, "unrenewable"))
		g.Expect(renewed).NotTo(Equal(token))
		fleet.HandOver(renewed)
		cond := credentialsExpiring(g, "unrenewable")
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(v1alpha1.MemberCredentialsRenewableReason))
		v, _ := hubtest.Gauge(g, "widgethub_member_credentials_expiring", "unrenewable")
		g.Expect(v).To(BeZero())
	}, members.DefaultMaxRenewRetry, hubtest.Poll).Should(Succeed())
	hubtest.ExpectMemberReady(t, "unrenewable", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
}

// withoutRenewalRule empties the member role that allows the hub's
// renewals; the function it returns, also run when the test ends, puts the
// rules back.
func withoutRenewalRule(t *testing.T, member *fleet.ControlPlane) (restore func()) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: plugin.MemberNamespace, Name: plugin.MemberClusterRole}
	role := &rbacv1.Role{}
	g.Expect(member.Client.Get(ctx, key, role)).To(Succeed())
	rules := role.Rules
	role.Rules = nil
	g.Expect(member.Client.Update(ctx, role)).To(Succeed())
	var once sync.Once
	restore = func() {
		once.Do(func() {
			g.Expect(member.Client.Get(ctx, key, role)).To(Succeed())
			role.Rules = rules
			g.Expect(member.Client.Update(ctx, role)).To(Succeed())
		})
	}
	t.Cleanup(restore)
	return restore
}

// A registration without join's renewal mark is never rewritten by the hub,
// even with a token that join could have minted (bound to a token Secret,
// the annotation naming it): CredentialsExpiring warns instead, from the
// warning window on.
func TestHandWrittenRegistrationIsNotRenewed(t *testing.T) {
	renewMember(t, renewShared)
	t.Parallel()
	g := NewWithT(t)
	secret := joinRenewable(t, renewShared, "by-hand")
	// What an older join, or a person, writes: no renewal mark.
	delete(secret.Annotations, registration.RenewTokenAnnotation)
	g.Expect(testFleet.Hub.Client.Update(context.Background(), secret)).To(Succeed())
	version := secret.ResourceVersion
	_, claims := tokenOf(g, secret)
	due := claims.IssuedAt.Add(time.Duration(float64(claims.Lifetime()) * (1 - renewRemaining)))

	g.Eventually(func(g Gomega) {
		cond := credentialsExpiring(g, "by-hand")
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "10 minutes are within the warning window")
		g.Expect(cond.Reason).To(Equal(v1alpha1.MemberCredentialsExpiresSoonReason))
		g.Expect(cond.Message).To(ContainSubstring("kubectl widgethub join --overwrite"))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	// Well past the time the hub would have renewed a marked one.
	time.Sleep(time.Until(due.Add(2 * engineOptions().ProbeInterval)))
	g.Consistently(func(g Gomega) {
		g.Expect(hubSecret(g, "by-hand").ResourceVersion).To(Equal(version), "the hub rewrote a registration join did not mark")
	}, 3*engineOptions().ProbeInterval, hubtest.Poll).Should(Succeed())
	hubtest.ExpectMemberReady(t, "by-hand", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
}
