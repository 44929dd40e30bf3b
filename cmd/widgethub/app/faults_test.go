package app_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// hostPort is the host:port of cp's API server.
func hostPort(t *testing.T, cp *fleet.ControlPlane) string {
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// memberCluster returns the hub's MemberCluster called name.
func memberCluster(g Gomega, name string) *v1alpha1.MemberCluster {
	mc := &v1alpha1.MemberCluster{}
	g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: name}, mc)).To(Succeed())
	return mc
}

// expectMemberReady waits until name's Ready condition has status and reason,
// with a message containing each of words.
func expectMemberReady(t *testing.T, name string, status metav1.ConditionStatus, reason string, words ...string) *v1alpha1.MemberCluster {
	t.Helper()
	var mc *v1alpha1.MemberCluster
	NewWithT(t).Eventually(func(g Gomega) {
		mc = memberCluster(g, name)
		ready := readyConditionOf(mc)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status))
		g.Expect(ready.Reason).To(Equal(reason), "message: %s", ready.Message)
		for _, w := range words {
			g.Expect(ready.Message).To(ContainSubstring(w))
		}
	}, eventually, poll).Should(Succeed(), "MemberCluster %s", name)
	return mc
}

func readyConditionOf(mc *v1alpha1.MemberCluster) *metav1.Condition {
	for i := range mc.Status.Conditions {
		if mc.Status.Conditions[i].Type == v1alpha1.MemberReady {
			return &mc.Status.Conditions[i]
		}
	}
	return nil
}

func registerData(t *testing.T, name string, data map[string][]byte) {
	t.Helper()
	secret := registration.NewSecret(hubNS, name, nil)
	secret.Data = data
	if err := testFleet.Hub.Client.Create(context.Background(), secret); err != nil {
		t.Fatalf("create Secret %s: %v", name, err)
	}
	t.Cleanup(func() { unregister(t, name) })
}

func editKubeconfig(t *testing.T, kubeconfig []byte, edit func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	out, err := fleet.EditKubeconfig(kubeconfig, edit)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tokenKubeconfig is cp's kubeconfig authenticating with token instead of a client certificate.
func tokenKubeconfig(t *testing.T, cp *fleet.ControlPlane, token string) []byte {
	credentials.add(token)
	return editKubeconfig(t, cp.Kubeconfig, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.ClientCertificateData, u.ClientKeyData, u.Token = nil, nil, token
	})
}

// serviceAccountToken creates a ServiceAccount in cp (bound to clusterRole
// unless empty) and mints a token for it.
func serviceAccountToken(t *testing.T, cp *fleet.ControlPlane, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cp, "widgethub-system")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "widgethub-system", Name: name}}
	if err := cp.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if clusterRole != "" {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: sa.Namespace, Name: sa.Name}},
		}
		if err := cp.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return mintToken(t, cp, sa.Namespace, sa.Name)
}

// tcpProxied puts a fleet.Proxy (TCP, which a test can take down or hang)
// in front of cp for the rest of the test and returns it with cp's admin
// kubeconfig pointed at it.
func tcpProxied(t *testing.T, cp *fleet.ControlPlane) (*fleet.Proxy, []byte) {
	t.Helper()
	proxy, err := fleet.NewProxy(hostPort(t, cp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Down)
	return proxy, editKubeconfig(t, cp.Kubeconfig,
		func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "https://" + proxy.Addr() })
}

// frontKubeconfig is the kubeconfig of cp reached through front (a
// fleet.HTTPProxy or fleet.Front, which a client certificate cannot pass) as
// the ServiceAccount sa bound to the member role; the suite's log scans
// look for its token.
func frontKubeconfig(t *testing.T, front interface {
	Kubeconfig(kubeconfig []byte, token string) ([]byte, error)
}, cp *fleet.ControlPlane, sa string) []byte {
	t.Helper()
	installMemberRole(t, cp)
	token := serviceAccountToken(t, cp, sa, "widgethub-member")
	credentials.add(token)
	kubeconfig, err := front.Kubeconfig(cp.Kubeconfig, token)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// installMemberRole installs the member ClusterRole generated from the Widget reconciler's RBAC markers.
func installMemberRole(t *testing.T, cp *fleet.ControlPlane) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fleet.CRDPaths()[0], "..", "..", "member-rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// expectReconcilesPromptly changes a Widget in beta and waits for its
// Deployment to follow: faults elsewhere must not hold healthy members up.
func expectReconcilesPromptly(t *testing.T, name string, replicas int32) time.Duration {
	t.Helper()
	g := NewWithT(t)
	beta := testFleet.Member("beta")
	register(t, "beta", beta)
	key := types.NamespacedName{Namespace: "shop", Name: name}
	if err := beta.Client.Get(context.Background(), key, &v1alpha1.Widget{}); apierrors.IsNotFound(err) {
		createWidget(t, beta, key.Namespace, key.Name, replicas)
	} else {
		g.Eventually(func(g Gomega) {
			w := widget(g, beta, key)
			w.Spec.Replicas = ptr.To(replicas)
			g.Expect(beta.Client.Update(context.Background(), w)).To(Succeed())
		}, eventually, poll).Should(Succeed())
	}
	start := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, beta, key).Spec.Replicas).To(Equal(ptr.To(replicas)))
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed(), "a healthy member's change waited behind faulty members")
	return time.Since(start)
}

// refusedRegistration is the data of a registration Secret the hub must
// refuse, with the reason and the words of the Ready condition it reports.
type refusedRegistration struct {
	name, reason string
	data         map[string][]byte
	words        []string
}

// expectRefusedWhileServing registers each of regs as the Secret
// prefix-name, checks that a healthy member's change is reconciled promptly
// meanwhile (while says what the registrations go through), then, in a
// subtest per registration, waits until its MemberCluster reports the
// refusal and runs check with the Secret's name.
func expectRefusedWhileServing(t *testing.T, prefix, while string, regs []refusedRegistration, check func(t *testing.T, secret string, mc *v1alpha1.MemberCluster)) {
	t.Helper()
	for _, r := range regs {
		registerData(t, prefix+"-"+r.name, r.data)
	}
	took := expectReconcilesPromptly(t, "unbothered-by-"+prefix, 2)
	t.Logf("healthy member reconciled a change in %s while %s", took, while)
	for _, r := range regs {
		t.Run(r.name, func(t *testing.T) {
			mc := expectMemberReady(t, prefix+"-"+r.name, metav1.ConditionFalse, r.reason, r.words...)
			check(t, prefix+"-"+r.name, mc)
		})
	}
}

func TestFaultyRegistrationsAreReportedWithoutHarmingOthers(t *testing.T) {
	alpha, beta := testFleet.Member("alpha"), testFleet.Member("beta")

	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	_ = refused.Close() // nothing listens there any more

	hanging, hangingKubeconfig := tcpProxied(t, alpha)
	hanging.Hang(true)

	betaCA := func() []byte {
		var ca []byte
		editKubeconfig(t, beta.Kubeconfig, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { ca = c.CertificateAuthorityData })
		return ca
	}()
	unprivileged := serviceAccountToken(t, alpha, "no-rights", "")

	cases := []refusedRegistration{
		{"garbage", v1alpha1.MemberInvalidKubeconfigReason, map[string][]byte{"kubeconfig": []byte("this is not a kubeconfig: [")}, []string{"kubeconfig"}},
		{"no-key", v1alpha1.MemberInvalidKubeconfigReason, map[string][]byte{"config": alpha.Kubeconfig}, []string{`"kubeconfig" data key`}},
		{"refused", v1alpha1.MemberUnreachableReason, map[string][]byte{"kubeconfig": editKubeconfig(t, alpha.Kubeconfig,
			func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "https://" + refusedAddr })}, []string{"connection refused"}},
		{"hanging", v1alpha1.MemberUnreachableReason, map[string][]byte{"kubeconfig": hangingKubeconfig}, nil},
		{"wrong-ca", v1alpha1.MemberUnreachableReason, map[string][]byte{"kubeconfig": editKubeconfig(t, alpha.Kubeconfig,
			func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthorityData = betaCA })}, []string{"certificate"}},
		{"bad-token", v1alpha1.MemberUnauthorizedReason, map[string][]byte{"kubeconfig": tokenKubeconfig(t, alpha, "not-a-valid-token-0123456789abcdef")}, []string{"401"}},
		{"forbidden", v1alpha1.MemberForbiddenReason, map[string][]byte{"kubeconfig": tokenKubeconfig(t, alpha, unprivileged)}, []string{"403"}},
		{"exec-plugin", v1alpha1.MemberExecPluginRefusedReason, map[string][]byte{"kubeconfig": editKubeconfig(t, alpha.Kubeconfig,
			func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
				u.ClientCertificateData, u.ClientKeyData = nil, nil
				u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/true", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			})}, []string{"exec"}},
	}
	expectRefusedWhileServing(t, "fault", "faulty registrations were tried", cases,
		func(t *testing.T, secret string, mc *v1alpha1.MemberCluster) {
			if leaked := credentials.foundIn(readyConditionOf(mc).Message); len(leaked) > 0 {
				t.Fatalf("the status message reveals a credential: %s", readyConditionOf(mc).Message)
			}
			g := NewWithT(t)
			owner := metav1.GetControllerOf(mc)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.Kind).To(Equal("Secret"))
			g.Expect(owner.Name).To(Equal(secret))
		})
	took := expectReconcilesPromptly(t, "unbothered-by-fault", 3)
	t.Logf("healthy member reconciled a change in %s after the faults settled", took)

	// The Secret carries an Event for the transition.
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(secretEventReasons(g, "fault-refused")).To(ContainElement(v1alpha1.MemberUnreachableReason))
	}, eventually, poll).Should(Succeed())
}

func TestMemberWithoutWidgetCRDIsEngagedOnceItAppears(t *testing.T) {
	g := NewWithT(t)
	bare := testFleet.Member("bare")
	crds := envtest.CRDInstallOptions{Paths: fleet.CRDPaths()}
	// Last, once bare is unregistered: bare without CRDs again.
	t.Cleanup(func() { uninstallCRDs(t, bare, crds) })
	registerData(t, "bare", map[string][]byte{"kubeconfig": bare.Kubeconfig})
	expectMemberReady(t, "bare", metav1.ConditionFalse, v1alpha1.MemberWidgetCRDMissingReason, "Widget")

	if _, err := envtest.InstallCRDs(bare.Config, crds); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mc := expectMemberReady(t, "bare", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	took := time.Since(start)
	t.Logf("engaged %s after the CRD appeared", took.Round(time.Millisecond))
	// docs/member-health.md (WidgetCRDMissing): "the member is engaged within
	// 15s of it appearing". The CRD appears here right after a failed
	// attempt, the worst moment.
	g.Expect(took).To(BeNumerically("<", 15*time.Second), "docs/member-health.md promises engagement within 15s of the CRD appearing")
	g.Expect(mc.Status.KubernetesVersion).To(Equal("v1.36.3"))

	key := createShopWidget(t, bare, "late", 1)
	g.Eventually(func(g Gomega) { deployment(g, bare, key) }, eventually, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(memberCluster(g, "bare").Status.Widgets).To(Equal(int32(1))) }, eventually, poll).Should(Succeed())
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
	}, eventually, poll).Should(Succeed())
}

func TestMemberOutageIsReportedAndNothingIsLost(t *testing.T) {
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	proxy, kubeconfig := tcpProxied(t, gamma)
	registerData(t, "flaky", map[string][]byte{"kubeconfig": kubeconfig})
	expectMemberReady(t, "flaky", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	key := createShopWidget(t, gamma, "outage", 1)
	g.Eventually(func(g Gomega) { deployment(g, gamma, key) }, eventually, poll).Should(Succeed())

	down := time.Now()
	proxy.Down()
	expectMemberReady(t, "flaky", metav1.ConditionFalse, v1alpha1.MemberUnreachableReason)
	toUnreachable := time.Since(down)
	// One transition, one Event: the member was engaged once so far, so its
	// Engaged Event is not a series (a reconcile that read the status from
	// a cache behind the last write recorded the transition twice). Events
	// about an earlier run's Secret of that name do not count.
	secret := &corev1.Secret{}
	g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: "flaky"}, secret)).To(Succeed())
	for _, e := range secretEventsV1(g, "flaky") {
		if e.Regarding.UID == secret.UID && e.Reason == v1alpha1.MemberEngagedReason && e.Series != nil {
			t.Errorf("the Engaged Event of flaky is a series of %d after one engagement", e.Series.Count)
		}
	}

	// A change made while the member is away.
	g.Eventually(func(g Gomega) {
		w := widget(g, gamma, key)
		w.Spec.Replicas = ptr.To[int32](3)
		g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())
	}, eventually, poll).Should(Succeed())

	if err := proxy.Up(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	expectMemberReady(t, "flaky", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	toReady := time.Since(up)
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To[int32](3)))
	}, eventually, poll).Should(Succeed(), "the change made during the outage was lost")
	toReconciled := time.Since(up)

	t.Logf("member death -> Unreachable: %s; return -> Ready: %s; return -> missed change reconciled: %s",
		toUnreachable.Round(time.Millisecond), toReady.Round(time.Millisecond), toReconciled.Round(time.Millisecond))
	// docs/member-health.md: a member whose probes fail
	// --probe-failure-threshold times in a row ("about 15s with the
	// defaults") is parked and Unreachable; fewer failures leave it Ready.
	// The first failing probe comes at most one interval after the death,
	// and each probe may take up to the probe timeout.
	opts := managerOptions()
	threshold := time.Duration(opts.ProbeFailureThreshold)
	g.Expect(toUnreachable).To(BeNumerically(">=", (threshold-1)*opts.ProbeInterval),
		"Unreachable after fewer than %d failed probes", opts.ProbeFailureThreshold)
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
		for _, e := range secretEventsV1(g, name) {
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
	}, eventually, poll).Should(Succeed())
}

// secretEventsV1 lists the hub's events.k8s.io Events about a registration Secret.
func secretEventsV1(g Gomega, secret string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(testFleet.Hub.Client.List(context.Background(), list, client.InNamespace(hubNS))).To(Succeed())
	var events []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Secret" && e.Regarding.Name == secret {
			events = append(events, e)
		}
	}
	return events
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
	installMemberRole(t, gamma)
	first := serviceAccountToken(t, gamma, "widgethub", "widgethub-member")
	registerData(t, "rotating", map[string][]byte{"kubeconfig": tokenKubeconfig(t, gamma, first)})
	expectMemberReady(t, "rotating", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	key := createShopWidget(t, gamma, "rotor", 1)
	g.Eventually(func(g Gomega) { deployment(g, gamma, key) }, eventually, poll).Should(Succeed())

	// Rotate the token and change the Widget at the same moment.
	second := serviceAccountToken(t, gamma, "widgethub", "widgethub-member")
	g.Expect(first).NotTo(Equal(second))
	secret := &corev1.Secret{}
	g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: "rotating"}, secret)).To(Succeed())
	secret.Data[registration.SecretKey] = tokenKubeconfig(t, gamma, second)
	g.Expect(testFleet.Hub.Client.Update(context.Background(), secret)).To(Succeed())
	rotated := time.Now()
	w := widget(g, gamma, key)
	w.Spec.Replicas = ptr.To[int32](2)
	g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To[int32](2)))
	}, eventually, poll).Should(Succeed())
	// Engaged as observed after the rotation, not the status from before it.
	expectMemberReadySince(t, "rotating", rotated, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	w = widget(g, gamma, key)
	w.Spec.Replicas = ptr.To[int32](4)
	g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To[int32](4)))
	}, eventually, poll).Should(Succeed())
}

func TestRegisterUnregisterCyclesLeaveNoGoroutine(t *testing.T) {
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	before := takeGoroutineSnapshot()
	var last types.UID
	for i := range 20 {
		register(t, "cycler", gamma)
		// A fresh engagement: a MemberCluster owned by this cycle's Secret,
		// written after the previous cycle's was deleted, which the hub does
		// once it disengaged the member.
		secret := &corev1.Secret{}
		g.Expect(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: "cycler"}, secret)).To(Succeed())
		g.Expect(secret.UID).NotTo(Equal(last), "cycle %d", i)
		last = secret.UID
		g.Eventually(func(g Gomega) {
			mc := memberCluster(g, "cycler")
			owner := metav1.GetControllerOf(mc)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.UID).To(Equal(secret.UID), "the MemberCluster of an earlier cycle's Secret")
			g.Expect(readyConditionOf(mc)).To(HaveField("Reason", v1alpha1.MemberEngagedReason))
		}, eventually, poll).Should(Succeed(), "cycle %d: engaged afresh", i)
		unregister(t, "cycler")
		expectUnregistered(t, "cycler")
	}
	expectNoneLeftSince(t, before)
}

// expectUnregistered waits until the hub has acted on the removal of the
// registration name: its MemberCluster is deleted, which the hub does after
// it disengaged the member (stopped its caches and watches). The caller must
// have seen the MemberCluster of that registration first: it is written
// after the engagement, so it may still be missing just after one.
func expectUnregistered(t *testing.T, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(testFleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: hubNS, Name: name}, &v1alpha1.MemberCluster{}))
	}, eventually, poll).Should(BeTrue(), "the MemberCluster %s of a removed registration", name)
}

// expectUnregistrationsDone waits until the hub has acted on every removed
// registration: each MemberCluster left has a labelled registration Secret.
// Earlier tests remove theirs when they end; until the hub disengages them,
// they may still reconcile their members' Widgets.
func expectUnregistrationsDone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	NewWithT(t).Eventually(func(g Gomega) {
		list := &v1alpha1.MemberClusterList{}
		g.Expect(testFleet.Hub.Client.List(ctx, list, client.InNamespace(hubNS))).To(Succeed())
		for _, mc := range list.Items {
			secret := &corev1.Secret{}
			g.Expect(testFleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(&mc), secret)).To(Succeed(), "MemberCluster %s without its Secret", mc.Name)
			g.Expect(secret.Labels).To(HaveKeyWithValue(registration.SecretLabel, "true"), "MemberCluster %s of an unlabelled Secret", mc.Name)
		}
	}, eventually, poll).Should(Succeed())
}

// expectMemberReadySince is expectMemberReady for a status written after
// since: status.lastProbeTime (whole seconds) is later than since's second.
func expectMemberReadySince(t *testing.T, name string, since time.Time, status metav1.ConditionStatus, reason string) *v1alpha1.MemberCluster {
	t.Helper()
	var mc *v1alpha1.MemberCluster
	NewWithT(t).Eventually(func(g Gomega) {
		mc = memberCluster(g, name)
		g.Expect(mc.Status.LastProbeTime).NotTo(BeNil())
		g.Expect(mc.Status.LastProbeTime.Time.After(since.Truncate(time.Second))).To(BeTrue(), "status written at %s, before %s", mc.Status.LastProbeTime, since)
		ready := readyConditionOf(mc)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status))
		g.Expect(ready.Reason).To(Equal(reason), "message: %s", ready.Message)
	}, eventually, poll).Should(Succeed(), "MemberCluster %s", name)
	return mc
}

// secretEvents lists the hub Events about a registration Secret.
func secretEvents(g Gomega, secret string) []corev1.Event {
	list := &corev1.EventList{}
	g.Expect(testFleet.Hub.Client.List(context.Background(), list, client.InNamespace(hubNS))).To(Succeed())
	var events []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Secret" && e.InvolvedObject.Name == secret {
			events = append(events, e)
		}
	}
	return events
}

// secretEventReasons lists the reasons of the hub Events about a registration Secret.
func secretEventReasons(g Gomega, secret string) []string {
	var reasons []string
	for _, e := range secretEvents(g, secret) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}
