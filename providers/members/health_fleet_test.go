package members_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// ownMembers are the members only the tests of this file use: delta, whose
// CRD and rights they take away, and epsilon, at which
// TestChurningSecretReengagesAtABoundedRate counts the watches of its
// engagements beside them.
var ownMembers = &hubtest.LateMembers{Names: []string{"delta", "epsilon"}}

// deltaMember is the member whose CRD and rights the tests take away. Of
// the tests at delta, only TestLostRightsAndLostCRDAreSeenAndRecovered runs
// beside others: it deletes the CRD, and with it every Widget there.
func deltaMember(t *testing.T) *fleet.ControlPlane { return ownMembers.Get(t, "delta") }

// A member whose identity loses its rights, or which loses the Widget CRD,
// while engaged is reported as such within 30 s, and once fixed is engaged
// again with its Widgets reconciled, the ones changed meanwhile included.
func TestLostRightsAndLostCRDAreSeenAndRecovered(t *testing.T) {
	d := deltaMember(t)
	t.Parallel()
	ctx := context.Background()
	hubtest.InstallMemberRole(t, d)
	token := hubtest.ServiceAccountToken(t, d, "widgethub-delta", "widgethub-member")
	hubtest.RegisterData(t, "delta", map[string][]byte{"kubeconfig": hubtest.TokenKubeconfig(t, d, token)})
	hubtest.ExpectMemberReady(t, "delta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	key := types.NamespacedName{Namespace: "shop", Name: "resilient"}
	hubtest.CreateWidget(t, d, key.Namespace, key.Name, 1)
	hubtest.ExpectReplicas(t, d, key, 1, hubtest.Within)

	// RBAC revoked: the binding goes.
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "widgethub-delta"}}
	if err := d.Client.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	hubtest.ExpectMemberReady(t, "delta", metav1.ConditionFalse, v1alpha1.MemberForbiddenReason, "403")
	t.Logf("Forbidden %s after the binding was deleted", time.Since(revoked).Round(time.Millisecond))
	hubtest.SetReplicas(t, d, key, 2) // changed while the hub may not see it

	// Restored: engaged afresh, and the change made meanwhile lands.
	hubtest.ServiceAccountToken(t, d, "widgethub-delta", "widgethub-member")
	restored := time.Now()
	hubtest.ExpectMemberReady(t, "delta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	hubtest.ExpectReplicas(t, d, key, 2, hubtest.Within)
	t.Logf("Engaged and reconciled %s after the binding was restored", time.Since(restored).Round(time.Millisecond))

	// The Widget CRD deleted (and with it every Widget).
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	crd.SetName("widgets.widgethub.io")
	if err := d.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	hubtest.ExpectMemberReady(t, "delta", metav1.ConditionFalse, v1alpha1.MemberWidgetCRDMissingReason)
	t.Logf("WidgetCRDMissing %s after the CRD was deleted", time.Since(deleted).Round(time.Millisecond))
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(d.Client.Get(ctx, types.NamespacedName{Name: crd.GetName()}, crd.DeepCopy()))
	}, hubtest.Within, hubtest.Poll).Should(BeTrue(), "the CRD is gone")

	// Restored: a Widget created afterwards is reconciled.
	if _, err := envtest.InstallCRDs(d.Config, envtest.CRDInstallOptions{Paths: fleet.CRDPaths(), ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	reinstalled := time.Now()
	hubtest.ExpectMemberReady(t, "delta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	again := types.NamespacedName{Namespace: "shop", Name: "after-crd"}
	hubtest.CreateWidget(t, d, again.Namespace, again.Name, 3)
	hubtest.ExpectReplicas(t, d, again, 3, hubtest.Within)
	t.Logf("Engaged and reconciled %s after the CRD was reinstalled", time.Since(reinstalled).Round(time.Millisecond))
}

// watchesOf counts the watch and list requests of Widgets and Deployments
// that cp's API server has served: every engagement starts both anew.
func watchesOf(t *testing.T, cp *fleet.ControlPlane) (watches, lists float64) {
	t.Helper()
	counts, err := fleet.RequestCounts(context.Background(), cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ours := func(verb string) func(map[string]string) bool {
		return func(l map[string]string) bool {
			return l["verb"] == verb && (l["resource"] == "widgets" || l["resource"] == "deployments") && l["subresource"] == ""
		}
	}
	return fleet.SumRequests(counts, ours("WATCH")), fleet.SumRequests(counts, ours("LIST"))
}

// churn rewrites the registration Secret name every 100 ms for d, cycling
// through kubeconfigs, and returns the last one written.
func churn(t *testing.T, name string, d time.Duration, kubeconfigs [][]byte) []byte {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: hubNS, Name: name}
	var last []byte
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		secret := &corev1.Secret{}
		if err := testFleet.Hub.Client.Get(ctx, key, secret); err != nil {
			t.Fatal(err)
		}
		last = kubeconfigs[i%len(kubeconfigs)]
		secret.Data[registration.SecretKey] = last
		if err := testFleet.Hub.Client.Update(ctx, secret); err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// A registration Secret rewritten ten times a second re-engages its member
// at a bounded rate and ends on its last version; when only the token
// changes, the member keeps its caches: no watch or list starts anew.
func TestChurningSecretReengagesAtABoundedRate(t *testing.T) {
	d := ownMembers.Get(t, "epsilon")
	t.Parallel()
	hubtest.InstallMemberRole(t, d)
	tokens := []string{
		hubtest.ServiceAccountToken(t, d, "widgethub-churn", "widgethub-member"),
		hubtest.ServiceAccountToken(t, d, "widgethub-churn", "widgethub-member"),
	}
	withContext := func(token, context string) []byte {
		return renameContext(t, hubtest.TokenKubeconfig(t, d, token), context)
	}
	// Naming the server "localhost" for TLS (its serving certificate's name)
	// changes how the hub connects: the member is engaged afresh.
	byName := func(context string) []byte {
		return renameContext(t, hubtest.EditKubeconfig(t, hubtest.TokenKubeconfig(t, d, tokens[0]),
			func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.TLSServerName = "localhost" }), context)
	}
	hubtest.RegisterData(t, "churn", map[string][]byte{"kubeconfig": withContext(tokens[0], "first")})
	hubtest.ExpectMemberReady(t, "churn", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	key := types.NamespacedName{Namespace: "shop", Name: "churned"}
	hubtest.CreateWidget(t, d, key.Namespace, key.Name, 1)
	hubtest.ExpectReplicas(t, d, key, 1, hubtest.Within)

	// Only the token changes.
	watches, lists := watchesOf(t, d)
	interval := engineOptions().MinReengageInterval
	churn(t, "churn", 2*interval, [][]byte{withContext(tokens[1], "first"), withContext(tokens[0], "first")})
	hubtest.SetReplicas(t, d, key, 2) // served through the swapped token by the caches kept
	hubtest.ExpectReplicas(t, d, key, 2, hubtest.Within)
	w2, l2 := watchesOf(t, d)
	t.Logf("token-only churn for %s: %v watches and %v lists of Widgets and Deployments", 2*interval, w2-watches, l2-lists)
	if w2 != watches {
		t.Errorf("a token-only change started %v new watches: the member's caches were rebuilt", w2-watches)
	}

	// The kubeconfig changes how the hub connects.
	window := 6 * interval
	last := churn(t, "churn", window, [][]byte{byName("second"), withContext(tokens[0], "third"), byName("final")})
	if !strings.Contains(string(last), "final") {
		last = byName("final")
		churn(t, "churn", 100*time.Millisecond, [][]byte{last})
	}
	hubtest.ExpectMemberReady(t, "churn", metav1.ConditionTrue, v1alpha1.MemberEngagedReason, `context "final"`)
	w3, l3 := watchesOf(t, d)
	// One engagement per interval at most, each watching two kinds (and
	// listing them when watch-list is not in use), plus the first.
	limit := 2 * (window/interval + 2)
	t.Logf("kubeconfig churn for %s: %v watches and %v lists of Widgets and Deployments (limit %d)", window, w3-w2, l3-l2, limit)
	if w3-w2 > float64(limit) || l3-l2 > float64(limit)+2*float64(window/interval+2) {
		t.Errorf("%v watches and %v lists in %s of churn; the bound is %d engagements' worth", w3-w2, l3-l2, window, limit)
	}
	hubtest.SetReplicas(t, d, key, 3)
	hubtest.ExpectReplicas(t, d, key, 3, hubtest.Within)
}

// Removing the registration label is unregistering: the member is
// disengaged and its MemberCluster deleted, although the Secret stays.
func TestUnlabelledSecretUnregistersTheMember(t *testing.T) {
	d := deltaMember(t)
	hubtest.ExpectUnregistrationsDone(t) // no earlier test's registration of delta lingers
	hubtest.RegisterEngaged(t, "unlabelled", d)
	key := types.NamespacedName{Namespace: "unlabelled", Name: "served"}
	hubtest.CreateWidget(t, d, key.Namespace, key.Name, 1)
	hubtest.ExpectReplicas(t, d, key, 1, hubtest.Within)
	ctx := context.Background()
	secret := &corev1.Secret{}
	g := NewWithT(t)
	g.Expect(testFleet.Hub.Client.Get(ctx, types.NamespacedName{Namespace: hubNS, Name: "unlabelled"}, secret)).To(Succeed())
	delete(secret.Labels, registration.SecretLabel)
	g.Expect(testFleet.Hub.Client.Update(ctx, secret)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(testFleet.Hub.Client.Get(ctx, types.NamespacedName{Namespace: hubNS, Name: "unlabelled"}, &v1alpha1.MemberCluster{}))
	}, hubtest.Within, hubtest.Poll).Should(BeTrue(), "the MemberCluster of an unlabelled Secret")
	g.Eventually(func(g Gomega) []string { return memberSeries(g, "unlabelled") }, hubtest.Within, hubtest.Poll).Should(BeEmpty(),
		"the member's metrics are removed")

	// Disengaged: a change in the member is no longer acted on, although the
	// hub acts on a later change in a member it serves.
	hubtest.SetReplicas(t, d, key, 2)
	hubtest.ExpectReconcilesPromptly(t, "unlabelled-witness", 2)
	g.Consistently(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, d, key).Spec.Replicas).To(Equal(ptr.To[int32](1)))
	}, hubtest.QuietFor, hubtest.Poll).Should(Succeed(), "a change in the member of an unlabelled Secret was reconciled")
}

// The hub reads registrations in its registration namespace only: a
// labelled Secret elsewhere gets no MemberCluster and no metrics, while one
// created after it in the registration namespace is engaged.
func TestRegistrationNamespaceScopesTheHub(t *testing.T) {
	ctx := context.Background()
	const elsewhere = "not-the-registration-namespace"
	g := NewWithT(t)
	g.Expect(fleet.EnsureNamespace(ctx, testFleet.Hub.Client, elsewhere)).To(Succeed())
	outsider := registration.NewSecret(elsewhere, "outsider", testFleet.Member("beta").Kubeconfig)
	g.Expect(testFleet.Hub.Client.Create(ctx, outsider)).To(Succeed())
	t.Cleanup(func() {
		if err := testFleet.Hub.Client.Delete(ctx, outsider); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
	// The hub had its chance: a registration made after the outsider, in
	// the registration namespace, is engaged.
	hubtest.RegisterEngaged(t, "insider", testFleet.Member("beta"))

	list := &v1alpha1.MemberClusterList{}
	g.Expect(testFleet.Hub.Client.List(ctx, list)).To(Succeed())
	for _, mc := range list.Items {
		g.Expect(mc.Name).NotTo(Equal("outsider"), "a MemberCluster %s/%s for a Secret outside the registration namespace", mc.Namespace, mc.Name)
	}
	g.Expect(memberSeries(g, "outsider")).To(BeEmpty(), "metrics of a Secret outside the registration namespace")
	g.Expect(hubtest.SecretEventsV1(g, "outsider")).To(BeEmpty())
}

// A member whose probes fail fewer times in a row than
// --probe-failure-threshold stays Ready (its message names the failed
// probe); the next passing probe clears it.
func TestFewerFailuresThanTheThresholdStayReady(t *testing.T) {
	gamma := testFleet.Member("gamma")
	proxy, kubeconfig := hubtest.TCPProxied(t, gamma)
	hubtest.RegisterData(t, "threshold", map[string][]byte{"kubeconfig": kubeconfig})
	hubtest.ExpectMemberReady(t, "threshold", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	threshold := engineOptions().FailureThreshold
	g := NewWithT(t)

	// Every status the hub writes meanwhile, as a hubtest.Poll of the MemberCluster sees it.
	var mu sync.Mutex
	var seen []string
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			mc := &v1alpha1.MemberCluster{}
			if err := testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: "threshold"}, mc); err == nil {
				if ready := hubtest.ReadyConditionOf(mc); ready != nil {
					mu.Lock()
					seen = append(seen, string(ready.Status)+" "+ready.Reason+": "+ready.Message)
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	stopWatching := func() []string {
		close(stop)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return seen
	}

	failures := func(g Gomega) float64 {
		return hubtest.CounterSum(g, "widgethub_member_probe_failures_total", "cluster", "threshold")
	}
	before := failures(g)
	proxy.Down()
	g.Eventually(failures, hubtest.Within, hubtest.Poll).Should(BeNumerically(">=", before+float64(threshold-1)), "failed probes")
	// The next probe comes a probe interval after the last one failed.
	g.Expect(proxy.Up()).To(Succeed())
	up := time.Now()
	failed := failures(g) - before
	hubtest.ExpectMemberReadySince(t, "threshold", up, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.ReadyConditionOf(hubtest.MemberCluster(g, "threshold")).Message).NotTo(ContainSubstring("probe failed"))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "a passing probe clears the failure")
	statuses := stopWatching()

	t.Logf("%v probes failed in a row (threshold %d); statuses seen: %q", failed, threshold, slices.Compact(slices.Clone(statuses)))
	g.Expect(failed).To(Equal(float64(threshold-1)), "failed probes in a row: the member came back too late for this test")
	g.Expect(statuses).To(ContainElement(ContainSubstring("last probe failed")), "the Ready condition names the failed probe")
	for _, s := range statuses {
		g.Expect(s).To(HavePrefix("True "+v1alpha1.MemberEngagedReason), "Ready after %d failed probes, threshold %d", threshold-1, threshold)
	}
}

// status.lastProbeTime is kept across probes while nothing changes, and
// rewritten although nothing changes before it is ProbeRefresh (a minute by
// default) and one interval old.
func TestLastProbeTimeIsRefreshed(t *testing.T) {
	t.Parallel()
	beta := testFleet.Member("beta")
	mc := hubtest.RegisterEngaged(t, "refreshed", beta)
	g := NewWithT(t)
	// The first write after the engagement: its lastProbeTime is then kept
	// across the next probe while the status does not change.
	opts := engineOptions()
	var first time.Time
	g.Eventually(func(g Gomega) {
		mc = hubtest.MemberCluster(g, "refreshed")
		g.Expect(mc.Status.LastProbeTime).NotTo(BeNil())
		first = mc.Status.LastProbeTime.Time
		g.Consistently(func(g Gomega) {
			g.Expect(hubtest.MemberCluster(g, "refreshed").Status.LastProbeTime.Time).To(Equal(first))
		}, opts.ProbeInterval+opts.ProbeInterval/4, opts.ProbeInterval/4).Should(Succeed())
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	limit := opts.ProbeRefresh + opts.ProbeInterval + time.Second // whole seconds
	var next time.Time
	g.Eventually(func(g Gomega) {
		next = hubtest.MemberCluster(g, "refreshed").Status.LastProbeTime.Time
		g.Expect(next).NotTo(Equal(first))
	}, limit+hubtest.Within, time.Second).Should(Succeed())
	t.Logf("lastProbeTime went from %s to %s (%s)", first.Format(time.TimeOnly), next.Format(time.TimeOnly), next.Sub(first))
	g.Expect(next.Sub(first)).To(BeNumerically("<=", limit),
		"docs/member-health.md: lastProbeTime is rewritten before it is ProbeRefresh (a minute by default) and one interval old")
	g.Expect(hubtest.ReadyConditionOf(hubtest.MemberCluster(g, "refreshed")).Reason).To(Equal(v1alpha1.MemberEngagedReason))
}

// On a hub whose probes come late (here, a member whose /version and
// /readyz each take 1.5s to answer, so that a probe ends about 5s after the
// last, not 2s), status.lastProbeTime still never gets older than
// ProbeRefresh and one probe interval: it is rewritten at the probe after
// which the next, as late, would come too late. (Rewritten only at the
// first probe ProbeRefresh after the last write, it was 10s old before it
// was, against the 8s of the bound and its second of rounding.)
func TestLastProbeTimeIsRefreshedAheadOfLateProbes(t *testing.T) {
	t.Parallel()
	const answerIn = 1500 * time.Millisecond
	opts := engineOptions()
	if answerIn >= opts.ProbeTimeout {
		t.Fatalf("probes answered in %s a step would fail their timeout of %s", answerIn, opts.ProbeTimeout)
	}
	beta := testFleet.Member("beta")
	front, err := fleet.NewHTTPProxy(beta.Config.Host, beta.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	front.Set(fleet.Fault{Latency: answerIn, Match: func(r *http.Request) bool {
		return r.URL.Path == "/version" || r.URL.Path == "/readyz"
	}})
	hubtest.RegisterData(t, "late-probes", map[string][]byte{"kubeconfig": hubtest.FrontKubeconfig(t, front, beta, "widgethub-late-probes")})
	hubtest.ExpectMemberReady(t, "late-probes", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	// lastProbeTime has whole seconds: a write is up to a second older than it shows.
	bound := opts.ProbeRefresh + opts.ProbeInterval + time.Second
	g := NewWithT(t)
	var oldest time.Duration
	writes := map[time.Time]bool{}
	for end := time.Now().Add(3 * bound); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		last := hubtest.MemberCluster(g, "late-probes").Status.LastProbeTime
		g.Expect(last).NotTo(BeNil())
		writes[last.Time] = true
		oldest = max(oldest, time.Since(last.Time))
	}
	t.Logf("oldest lastProbeTime seen %s (bound %s), %d writes of it in %s", oldest.Round(time.Millisecond), bound, len(writes), 3*bound)
	if oldest > bound {
		t.Errorf("lastProbeTime got %s old with probes late, more than ProbeRefresh %s, one probe interval %s and a second",
			oldest.Round(time.Millisecond), opts.ProbeRefresh, opts.ProbeInterval)
	}
	if len(writes) < 3 {
		t.Errorf("lastProbeTime was written %d times in %s; the check saw too few refreshes to tell", len(writes), 3*bound)
	}
}

// memberSeries names the widgethub_member_* families with series labelled
// with cluster.
func memberSeries(g Gomega, cluster string) []string {
	series, err := hubtest.SeriesLabelled("cluster", cluster)
	g.Expect(err).NotTo(HaveOccurred())
	var found []string
	for family := range series {
		if strings.HasPrefix(family, "widgethub_member_") {
			found = append(found, family)
		}
	}
	return found
}

// renameContext returns kubeconfig with its current context named name.
func renameContext(t *testing.T, kubeconfig []byte, name string) []byte {
	t.Helper()
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := connect.CurrentContext(raw)
	if err != nil {
		t.Fatal(err)
	}
	kctx := raw.Contexts[cur.Name]
	delete(raw.Contexts, cur.Name)
	raw.Contexts[name], raw.CurrentContext = kctx, name
	out, err := clientcmd.Write(*raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A member that answers its probes but refuses most of what the hub writes
// turns Degraded, and Engaged again as soon as its writes succeed.
func TestMostlyFailingWritesMakeTheMemberDegraded(t *testing.T) {
	d := deltaMember(t)
	const ns = "refused"
	hubtest.RegisterEngaged(t, "degraded", d)
	lift := hubtest.DenyDeploymentWritesInForce(t, d, ns)

	// More than half of the member's Widgets, whatever earlier tests left.
	earlier := &v1alpha1.WidgetList{}
	if err := d.Client.List(context.Background(), earlier); err != nil {
		t.Fatal(err)
	}
	widgets := max(12, len(earlier.Items)+1)
	refused := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("w-%02d", i)}
	}
	for i := range widgets {
		hubtest.CreateWidget(t, d, ns, refused(i).Name, 1)
	}
	hubtest.ExpectMemberReady(t, "degraded", metav1.ConditionFalse, v1alpha1.MemberDegradedReason,
		fmt.Sprintf("the latest reconcile failed for %d of its %d Widgets", widgets, widgets+len(earlier.Items)))

	lift()
	// Each change is reconciled at once, not at its backoff, and each
	// success leaves the failing Widgets fewer.
	for i := range widgets {
		hubtest.SetReplicas(t, d, refused(i), 2)
	}
	for i := range widgets {
		hubtest.ExpectReplicas(t, d, refused(i), 2, hubtest.Within)
	}
	hubtest.ExpectMemberReady(t, "degraded", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
}

// One Widget whose writes are refused is that Widget's trouble, not its
// member's: retried at its backoff a dozen times over a few probes, it is
// one failing Widget, so the member stays Engaged while the Widget is Stalled.
func TestOneRefusedWidgetLeavesItsMemberEngaged(t *testing.T) {
	d := deltaMember(t)
	const ns = "refused-alone"
	hubtest.RegisterEngaged(t, "one-refused", d)
	hubtest.DenyDeploymentWritesInForce(t, d, ns)
	hubtest.CreateWidget(t, d, ns, "refused", 1)
	hubtest.ExpectWidgetKstatus(t, d, types.NamespacedName{Namespace: ns, Name: "refused"}, kstatus.FailedStatus, "Stalled", v1alpha1.WidgetDeploymentFailedReason)

	// The retries (5 ms, doubling) pass ten within 6 s and twelve within
	// 21 s, while four probes judge the member: ten failed attempts, as
	// many as ten failing Widgets.
	window := 4 * engineOptions().ProbeInterval
	NewWithT(t).Consistently(func(g Gomega) {
		ready := hubtest.ReadyConditionOf(hubtest.MemberCluster(g, "one-refused"))
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
	}, window, hubtest.Poll).Should(Succeed())
	failed := hubtest.CounterSum(NewWithT(t), "widgethub_member_reconcile_errors_total", "cluster", "one-refused")
	t.Logf("the refused Widget's reconcile failed %v times in %s", failed, window)
	if failed < 10 {
		t.Errorf("the refused Widget's reconcile failed only %v times: too few to tell Widgets from attempts", failed)
	}
}
