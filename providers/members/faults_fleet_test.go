package members_test

import (
	"context"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

func TestFaultyRegistrationsAreReportedWithoutHarmingOthers(t *testing.T) {
	alpha, beta := testFleet.Member("alpha"), testFleet.Member("beta")

	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	_ = refused.Close() // nothing listens there any more

	hanging, hangingKubeconfig := hubtest.TCPProxied(t, alpha)
	hanging.Hang(true)

	betaCA := func() []byte {
		var ca []byte
		hubtest.EditKubeconfig(t, beta.Kubeconfig, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { ca = c.CertificateAuthorityData })
		return ca
	}()
	unprivileged := hubtest.ServiceAccountToken(t, alpha, "no-rights", "")

	cases := []hubtest.RefusedRegistration{
		hubtest.Refused("garbage", v1alpha1.MemberInvalidKubeconfigReason, map[string][]byte{"kubeconfig": []byte("this is not a kubeconfig: [")}, []string{"kubeconfig"}),
		hubtest.Refused("no-key", v1alpha1.MemberInvalidKubeconfigReason, map[string][]byte{"config": alpha.Kubeconfig}, []string{`"kubeconfig" data key`}),
		hubtest.Refused("refused", v1alpha1.MemberUnreachableReason, map[string][]byte{"kubeconfig": hubtest.EditKubeconfig(t, alpha.Kubeconfig,
			func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "https://" + refusedAddr })}, []string{"connection refused"}),
		hubtest.Refused("hanging", v1alpha1.MemberUnreachableReason, map[string][]byte{"kubeconfig": hangingKubeconfig}, nil),
		hubtest.Refused("wrong-ca", v1alpha1.MemberUnreachableReason, map[string][]byte{"kubeconfig": hubtest.EditKubeconfig(t, alpha.Kubeconfig,
			func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthorityData = betaCA })}, []string{"certificate"}),
		hubtest.Refused("bad-token", v1alpha1.MemberUnauthorizedReason, map[string][]byte{"kubeconfig": hubtest.TokenKubeconfig(t, alpha, "not-a-valid-token-0123456789abcdef")}, []string{"401"}),
		hubtest.Refused("forbidden", v1alpha1.MemberForbiddenReason, map[string][]byte{"kubeconfig": hubtest.TokenKubeconfig(t, alpha, unprivileged)}, []string{"403"}),
		hubtest.Refused("exec-plugin", v1alpha1.MemberExecPluginRefusedReason, map[string][]byte{"kubeconfig": hubtest.EditKubeconfig(t, alpha.Kubeconfig,
			func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.ClientCertificateData, u.ClientKeyData = nil, nil
				u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/true", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			})}, []string{"exec"}),
	}
	hubtest.ExpectRefusedWhileServing(t, "fault", "faulty registrations were tried", cases,
		func(t *testing.T, secret string, mc *v1alpha1.MemberCluster) {
			if leaked := fleet.LeakedIn(hubtest.ReadyConditionOf(mc).Message); len(leaked) > 0 {
				t.Fatalf("the status message reveals a credential: %s", hubtest.ReadyConditionOf(mc).Message)
			}
			g := NewWithT(t)
			owner := metav1.GetControllerOf(mc)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.Kind).To(Equal("Secret"))
			g.Expect(owner.Name).To(Equal(secret))
		})
	took := hubtest.ExpectReconcilesPromptly(t, "unbothered-by-fault", 3)
	t.Logf("healthy member reconciled a change in %s after the faults settled", took)

	// The Secret carries an Event for the transition.
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(hubtest.SecretEventReasons(g, "fault-refused")).To(ContainElement(v1alpha1.MemberUnreachableReason))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
}

func TestMemberWithoutWidgetCRDIsEngagedOnceItAppears(t *testing.T) {
	g := NewWithT(t)
	bare := testFleet.Member("bare")
	crds := envtest.CRDInstallOptions{Paths: fleet.CRDPaths()}
	// Last, once bare is unregistered: bare without CRDs again.
	t.Cleanup(func() { uninstallCRDs(t, bare, crds) })
	hubtest.RegisterData(t, "bare", map[string][]byte{"kubeconfig": bare.Kubeconfig})
	hubtest.ExpectMemberReady(t, "bare", metav1.ConditionFalse, v1alpha1.MemberWidgetCRDMissingReason, "Widget")

	if _, err := envtest.InstallCRDs(bare.Config, crds); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mc := hubtest.ExpectMemberReady(t, "bare", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	took := time.Since(start)
	t.Logf("engaged %s after the CRD appeared", took.Round(time.Millisecond))
	// docs/member-health.md (WidgetCRDMissing): "the member is engaged within
	// 15s of it appearing": the look again after MissingKindRetry (10s by
	// default, short here) and 5s for the engagement. The CRD appears here
	// right after a failed attempt, the worst moment.
	limit := engineOptions().MissingKindRetry + 5*time.Second
	g.Expect(took).To(BeNumerically("<", limit), "docs/member-health.md promises engagement within MissingKindRetry + 5s of the CRD appearing")
	g.Expect(mc.Status.KubernetesVersion).To(Equal("v1.36.3"))

	key := hubtest.CreateShopWidget(t, bare, "late", 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, bare, key) }, hubtest.Within, hubtest.Poll).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(hubtest.MemberCluster(g, "bare").Status.Widgets).To(Equal(int32(1))) }, hubtest.Within, hubtest.Poll).Should(Succeed())
}

// uninstallCRDs deletes the CRDs of opts from cp, with every object of
// theirs, and waits until they are gone.
func uninstallCRDs(t *testing.T, cp *fleet.ControlPlane, opts envtest.CRDInstallOptions) {
	t.Helper()
	ctx := context.Background()
	if err := envtest.UninstallCRDs(cp.Config, opts); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		crds := &unstructured.UnstructuredList{}
		crds.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
		g.Expect(cp.Client.List(ctx, crds)).To(Succeed())
		g.Expect(crds.Items).To(BeEmpty(), "CRDs of %s", cp.Name)
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
}

func TestMemberOutageIsReportedAndNothingIsLost(t *testing.T) {
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	proxy, kubeconfig := hubtest.TCPProxied(t, gamma)
	hubtest.RegisterData(t, "flaky", map[string][]byte{"kubeconfig": kubeconfig})
	hubtest.ExpectMemberReady(t, "flaky", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	key := hubtest.CreateShopWidget(t, gamma, "outage", 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, gamma, key) }, hubtest.Within, hubtest.Poll).Should(Succeed())

	down := time.Now()
	proxy.Down()
	hubtest.ExpectMemberReady(t, "flaky", metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)
	toUnreachable := time.Since(down)
	// One transition, one Event: the member was engaged once so far, so its
	// Engaged Event is not a series (a reconcile that read the status from
	// a cache behind the last write recorded the transition twice). Events
	// about an earlier run's Secret of that name do not count.
	secret := &corev1.Secret{}
	g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: "flaky"}, secret)).To(Succeed())
	for _, e := range hubtest.SecretEventsV1(g, "flaky") {
		if e.Regarding.UID == secret.UID && e.Reason == v1alpha1.MemberEngagedReason && e.Series != nil {
			t.Errorf("the Engaged Event of flaky is a series of %d after one engagement", e.Series.Count)
		}
	}

	// A change made while the member is away.
	g.Eventually(func(g Gomega) {
		w := hubtest.Widget(g, gamma, key)
		w.Spec.Replicas = ptr.To[int32](3)
		g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	hubtest.ExpectMemberReady(t, "flaky", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	toReady := time.Since(up)
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To[int32](3)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "the change made during the outage was lost")
	toReconciled := time.Since(up)

	t.Logf("member death -> Unreachable: %s; return -> Ready: %s; return -> missed change reconciled: %s",
		toUnreachable.Round(time.Millisecond), toReady.Round(time.Millisecond), toReconciled.Round(time.Millisecond))
	// docs/member-health.md: a member whose probes fail
	// --probe-failure-threshold times in a row ("about 15s with the
	// defaults") is parked and Unreachable; fewer failures leave it Ready.
	// The first failing probe comes at most one interval after the death,
	// and each probe may take up to the probe timeout.
	opts := engineOptions()
	threshold := time.Duration(opts.FailureThreshold)
	g.Expect(toUnreachable).To(BeNumerically(">=", (threshold-1)*opts.ProbeInterval),
		"Unreachable after fewer than %d failed probes", opts.FailureThreshold)
	g.Expect(toUnreachable).To(BeNumerically("<=", threshold*opts.ProbeInterval+opts.ProbeTimeout),
		"docs/member-health.md: Unreachable about 15s after the member stops answering")
	// "Ready within one probe interval" once a probe passes: the first probe
	// after the return comes within an interval.
	g.Expect(toReady).To(BeNumerically("<=", 2*opts.ProbeInterval), "Ready must show within a probe interval of the first passing probe")

	// Each transition is an Event on the Secret: Engaged, Unreachable when
	// parked, Engaged again after the return.
	expectTransitionEvents(t, "flaky", down, up)
}

// expectTransitionEvents checks the hub Events of the registration Secret
// name: a Warning Unreachable Event recorded after down, and the Normal
// Engaged Event recorded again after up (a repeated Event is a series of the
// first, so its last occurrence moves).
func expectTransitionEvents(t *testing.T, name string, down, up time.Time) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var unreachable, engagedAgain bool
		for _, e := range hubtest.SecretEventsV1(g, name) {
			g.Expect(e.ReportingController).NotTo(BeEmpty(), "Event %s", e.Name)
			switch {
			case e.Reason == v1alpha1.MemberUnreachableReason && e.Type == corev1.EventTypeWarning:
				unreachable = unreachable || lastOccurrence(e).After(down)
			case e.Reason == v1alpha1.MemberEngagedReason && e.Type == corev1.EventTypeNormal:
				engagedAgain = engagedAgain || lastOccurrence(e).After(up)
			}
		}
		g.Expect(unreachable).To(BeTrue(), "a Warning Event Unreachable on Secret %s after the member went down", name)
		g.Expect(engagedAgain).To(BeTrue(), "a Normal Event Engaged on Secret %s after the member came back", name)
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
}

// lastOccurrence is when e was last recorded: its series' last observation,
// or its own time.
func lastOccurrence(e eventsv1.Event) time.Time {
	if e.Series != nil {
		return e.Series.LastObservedTime.Time
	}
	return e.EventTime.Time
}

func TestRotatedTokenLosesNoChange(t *testing.T) {
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	hubtest.InstallMemberRole(t, gamma)
	first := hubtest.ServiceAccountToken(t, gamma, "widgethub", "widgethub-member")
	hubtest.RegisterData(t, "rotating", map[string][]byte{"kubeconfig": hubtest.TokenKubeconfig(t, gamma, first)})
	hubtest.ExpectMemberReady(t, "rotating", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	key := hubtest.CreateShopWidget(t, gamma, "rotor", 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, gamma, key) }, hubtest.Within, hubtest.Poll).Should(Succeed())

	// Rotate the token and change the Widget at the same moment.
	second := hubtest.ServiceAccountToken(t, gamma, "widgethub", "widgethub-member")
	g.Expect(first).NotTo(Equal(second))
	secret := &corev1.Secret{}
	g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: "rotating"}, secret)).To(Succeed())
	secret.Data[registration.SecretKey] = hubtest.TokenKubeconfig(t, gamma, second)
	g.Expect(testFleet.Hub.Client.Update(context.Background(), secret)).To(Succeed())
	rotated := time.Now()
	w := hubtest.Widget(g, gamma, key)
	w.Spec.Replicas = ptr.To[int32](2)
	g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To[int32](2)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	// Engaged as observed after the rotation, not the status from before it.
	hubtest.ExpectMemberReadySince(t, "rotating", rotated, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	w = hubtest.Widget(g, gamma, key)
	w.Spec.Replicas = ptr.To[int32](4)
	g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To[int32](4)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
}

func TestRegisterUnregisterCyclesLeaveNoGoroutine(t *testing.T) {
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	before := hubtest.TakeGoroutineSnapshot()
	var last types.UID
	for i := range 20 {
		hubtest.Register(t, "cycler", gamma)
		// A fresh engagement: a MemberCluster owned by this cycle's Secret,
		// written after the previous cycle's was deleted, which the hub does
		// once it disengaged the member.
		secret := &corev1.Secret{}
		g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: "cycler"}, secret)).To(Succeed())
		g.Expect(secret.UID).NotTo(Equal(last), "cycle %d", i)
		last = secret.UID
		g.Eventually(func(g Gomega) {
			mc := hubtest.MemberCluster(g, "cycler")
			owner := metav1.GetControllerOf(mc)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.UID).To(Equal(secret.UID), "the MemberCluster of an earlier cycle's Secret")
			g.Expect(hubtest.ReadyConditionOf(mc)).To(HaveField("Reason", v1alpha1.MemberEngagedReason))
		}, hubtest.Within, hubtest.Poll).Should(Succeed(), "cycle %d: engaged afresh", i)
		hubtest.Unregister(t, "cycler")
		hubtest.ExpectUnregistered(t, "cycler")
	}
	hubtest.ExpectNoneLeftSince(t, before)
}
