package app_test

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

const (
	eventually = 30 * time.Second
	poll       = 100 * time.Millisecond
	quietFor   = 3 * time.Second
)

// register creates or updates the registration Secret name with member's
// kubeconfig until the test ends: then it is deleted, so that no later test
// finds the member registered.
func register(t *testing.T, name string, member *fleet.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	secret := registration.NewSecret(hubNS, name, member.Kubeconfig)
	t.Cleanup(func() { unregister(t, name) })
	err := testFleet.Hub.Client.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		current := &corev1.Secret{}
		if err := testFleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(secret), current); err != nil {
			t.Fatal(err)
		}
		current.Data = secret.Data
		err = testFleet.Hub.Client.Update(ctx, current)
	}
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
}

// registerEngaged registers member as name until the test ends and waits
// until the hub has engaged it.
func registerEngaged(t *testing.T, name string, member *fleet.ControlPlane) *v1alpha1.MemberCluster {
	t.Helper()
	register(t, name, member)
	return expectMemberReady(t, name, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
}

func unregister(t *testing.T, name string) {
	t.Helper()
	unregisterIn(t, hubNS, name)
}

// unregisterIn deletes the registration Secret ns/name, if there is one.
func unregisterIn(t *testing.T, ns, name string) {
	t.Helper()
	secret := registration.NewSecret(ns, name, nil)
	if err := testFleet.Hub.Client.Delete(context.Background(), secret); client.IgnoreNotFound(err) != nil {
		t.Fatalf("unregister %s/%s: %v", ns, name, err)
	}
}

func ensureNamespace(t *testing.T, cp *fleet.ControlPlane, name string) {
	t.Helper()
	if err := fleet.EnsureNamespace(context.Background(), cp.Client, name); err != nil {
		t.Fatal(err)
	}
}

// createShopWidget creates the Widget shop/name in cp with replicas and returns its key.
func createShopWidget(t *testing.T, cp *fleet.ControlPlane, name string, replicas int32) types.NamespacedName {
	t.Helper()
	createWidget(t, cp, "shop", name, replicas)
	return types.NamespacedName{Namespace: "shop", Name: name}
}

// createWidget creates the Widget ns/name in cp with replicas; it is
// deleted, with its Deployment, when the test ends.
func createWidget(t *testing.T, cp *fleet.ControlPlane, ns, name string, replicas int32) *v1alpha1.Widget {
	t.Helper()
	ensureNamespace(t, cp, ns)
	w := &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.WidgetSpec{Replicas: ptr.To(replicas)},
	}
	if err := cp.Client.Create(context.Background(), w); err != nil {
		t.Fatalf("create widget %s/%s in %s: %v", ns, name, cp.Name, err)
	}
	t.Cleanup(func() { deleteWidget(t, cp, types.NamespacedName{Namespace: ns, Name: name}) })
	return w
}

// deleteWidget deletes the Widget key of cp and its Deployment (envtest runs
// no garbage collector).
func deleteWidget(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
	for _, obj := range []client.Object{&v1alpha1.Widget{ObjectMeta: meta}, &appsv1.Deployment{ObjectMeta: meta}} {
		if err := cp.Client.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %T %s in %s: %v", obj, key, cp.Name, err)
		}
	}
}

// deployment returns the member's Deployment for key, failing g when it is missing.
func deployment(g Gomega, cp *fleet.ControlPlane, key types.NamespacedName) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(cp.Client.Get(context.Background(), key, d)).To(Succeed())
	return d
}

func widget(g Gomega, cp *fleet.ControlPlane, key types.NamespacedName) *v1alpha1.Widget {
	w := &v1alpha1.Widget{}
	g.Expect(cp.Client.Get(context.Background(), key, w)).To(Succeed())
	return w
}

// setAvailable plays the Deployment controller's part: it reports n available replicas.
func setAvailable(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, n int32) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		d := deployment(g, cp, key)
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = n, n, n, n
		d.Status.ObservedGeneration = d.Generation
		g.Expect(cp.Client.Status().Update(context.Background(), d)).To(Succeed())
	}, eventually, poll).Should(Succeed())
}

func readyCondition(w *v1alpha1.Widget) *metav1.Condition {
	return meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WidgetReady)
}

// expectWidgetStatus waits until the Widget key of cp reports available
// replicas and a Ready condition of status, with reason and message unless
// they are empty.
func expectWidgetStatus(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, available int32, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		w := widget(g, cp, key)
		g.Expect(w.Status.AvailableReplicas).To(Equal(available))
		ready := readyCondition(w)
		g.Expect(ready).NotTo(BeNil(), "Ready of Widget %s", key)
		g.Expect(ready.Status).To(Equal(status))
		if reason != "" {
			g.Expect(ready.Reason).To(Equal(reason))
		}
		if message != "" {
			g.Expect(ready.Message).To(Equal(message))
		}
	}, eventually, poll).Should(Succeed())
}

func TestRegisteredMembersGetDeploymentsIndependently(t *testing.T) {
	g := NewWithT(t)
	alpha, beta := testFleet.Member("alpha"), testFleet.Member("beta")
	register(t, "alpha", alpha)
	register(t, "beta", beta)

	key := createShopWidget(t, alpha, "cart", 2)
	createWidget(t, beta, key.Namespace, key.Name, 3)

	for _, c := range []struct {
		member   *fleet.ControlPlane
		replicas int32
	}{{alpha, 2}, {beta, 3}} {
		g.Eventually(func(g Gomega) {
			w := widget(g, c.member, key)
			d := deployment(g, c.member, key)
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To(c.replicas)), "member %s", c.member.Name)
			g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(v1alpha1.DefaultWidgetImage))
			g.Expect(d.Labels).To(Equal(map[string]string{
				"app.kubernetes.io/name":       "widget",
				"app.kubernetes.io/instance":   "cart",
				"app.kubernetes.io/managed-by": "widgethub",
			}))
			owner := metav1.GetControllerOf(d)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.UID).To(Equal(w.UID))
			g.Expect(owner.Kind).To(Equal("Widget"))
			g.Expect(d.ManagedFields).To(ContainElement(HaveField("Manager", "widgethub")))

			g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))
			g.Expect(w.Status.AvailableReplicas).To(BeZero())
			ready := readyCondition(w)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.WidgetProgressingReason))
		}, eventually, poll).Should(Succeed())
	}

	// Only alpha's Deployment becomes available: only alpha's Widget turns Ready.
	setAvailable(t, alpha, key, 2)
	expectWidgetStatus(t, alpha, key, 2, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, "")
	w := widget(g, beta, key)
	g.Expect(readyCondition(w).Status).To(Equal(metav1.ConditionFalse))
}

func TestWidgetFollowsSpecAndDeployment(t *testing.T) {
	g := NewWithT(t)
	alpha := testFleet.Member("alpha")
	register(t, "alpha", alpha)
	key := createShopWidget(t, alpha, "scaler", 1)
	var firstUID types.UID
	g.Eventually(func(g Gomega) {
		firstUID = deployment(g, alpha, key).UID
	}, eventually, poll).Should(Succeed())

	// A changed spec.replicas reaches the Deployment.
	g.Eventually(func(g Gomega) {
		w := widget(g, alpha, key)
		w.Spec.Replicas = ptr.To(int32(4))
		g.Expect(alpha.Client.Update(context.Background(), w)).To(Succeed())
	}, eventually, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, alpha, key).Spec.Replicas).To(Equal(ptr.To(int32(4))))
	}, eventually, poll).Should(Succeed())

	// A deleted Deployment comes back.
	g.Expect(alpha.Client.Delete(context.Background(), deployment(g, alpha, key))).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := deployment(g, alpha, key)
		g.Expect(d.UID).NotTo(Equal(firstUID))
		g.Expect(d.Spec.Replicas).To(Equal(ptr.To(int32(4))))
	}, eventually, poll).Should(Succeed())

	// Deployment status drives the Widget's status, both ways.
	setAvailable(t, alpha, key, 4)
	expectWidgetStatus(t, alpha, key, 4, metav1.ConditionTrue, "", "")
	setAvailable(t, alpha, key, 3)
	expectWidgetStatus(t, alpha, key, 3, metav1.ConditionFalse, "", "3/4 replicas available")
}

// seriesLabelled returns, by family name, the series of the manager's
// metrics registry whose label has value.
func seriesLabelled(label, value string) (map[string][]*dto.Metric, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	found := map[string][]*dto.Metric{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					found[f.GetName()] = append(found[f.GetName()], m)
				}
			}
		}
	}
	return found, nil
}

// counterSum adds up the counter family's series whose label has value.
func counterSum(g Gomega, family, label, value string) float64 {
	series, err := seriesLabelled(label, value)
	g.Expect(err).NotTo(HaveOccurred())
	var total float64
	for _, m := range series[family] {
		total += m.GetCounter().GetValue()
	}
	return total
}

// widgetReconciles is how many Widget reconciles the manager has finished.
func widgetReconciles(g Gomega) float64 {
	return counterSum(g, "controller_runtime_reconcile_total", "controller", "widget")
}

// queueCounts are the shared queue's counters and the Widget controller's
// reconciles, as the manager's metrics registry reports them.
type queueCounts struct {
	adds, handedOut, done, reconciles, depth, active float64
}

func readQueueCounts(g Gomega) queueCounts {
	series, err := seriesLabelled("name", "widget")
	g.Expect(err).NotTo(HaveOccurred())
	one := func(family string) *dto.Metric {
		g.Expect(series[family]).To(HaveLen(1), "series of %s{name=\"widget\"}", family)
		return series[family][0]
	}
	active, _ := gaugeValue(g, "controller_runtime_active_workers", "controller", "widget")
	return queueCounts{
		adds:       one("widgethub_workqueue_adds_total").GetCounter().GetValue(),
		handedOut:  float64(one("widgethub_workqueue_queue_duration_seconds").GetHistogram().GetSampleCount()),
		done:       float64(one("widgethub_workqueue_work_duration_seconds").GetHistogram().GetSampleCount()),
		depth:      one("widgethub_workqueue_depth").GetGauge().GetValue(),
		reconciles: widgetReconciles(g),
		active:     active,
	}
}

// quietQueueCounts waits for a moment when nothing is queued or in flight
// (every request handed out is done, no worker busy, two reads alike) and
// returns the counts then.
func quietQueueCounts(t *testing.T) queueCounts {
	t.Helper()
	var c queueCounts
	NewWithT(t).Eventually(func(g Gomega) {
		c = readQueueCounts(g)
		g.Expect(c.depth).To(BeZero())
		g.Expect(c.active).To(BeZero())
		g.Expect(c.handedOut).To(Equal(c.done))
		time.Sleep(poll)
		g.Expect(readQueueCounts(g)).To(Equal(c))
	}, eventually, poll).Should(Succeed(), "the shared queue never went quiet")
	return c
}

// The shared queue's metrics account for every request exactly: between two
// quiet moments, each request added was handed out once, done once, and
// reconciled once by the Widget controller.
func TestSharedQueueReportsMetrics(t *testing.T) {
	g := NewWithT(t)
	alpha := testFleet.Member("alpha")
	register(t, "alpha", alpha)
	expectMemberReady(t, "alpha", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	before := quietQueueCounts(t)

	key := createShopWidget(t, alpha, "counted", 1)
	g.Eventually(func(g Gomega) {
		w := widget(g, alpha, key)
		g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))
		deployment(g, alpha, key)
	}, eventually, poll).Should(Succeed())
	after := quietQueueCounts(t)

	added := after.adds - before.adds
	t.Logf("one new Widget: %v requests added, %v handed out, %v done, %v reconciles", added,
		after.handedOut-before.handedOut, after.done-before.done, after.reconciles-before.reconciles)
	g.Expect(added).To(BeNumerically(">=", 1), "the new Widget's request")
	g.Expect(after.handedOut-before.handedOut).To(Equal(added), "requests handed out (queue_duration_seconds observations)")
	g.Expect(after.done-before.done).To(Equal(added), "requests done (work_duration_seconds observations)")
	g.Expect(after.reconciles-before.reconciles).To(Equal(added), "Widget reconciles (controller_runtime_reconcile_total)")
}

func TestUnchangedWidgetWritesNothing(t *testing.T) {
	g := NewWithT(t)
	beta := testFleet.Member("beta")
	register(t, "beta", beta)
	key := createShopWidget(t, beta, "steady", 1)
	g.Eventually(func(g Gomega) { deployment(g, beta, key) }, eventually, poll).Should(Succeed())
	setAvailable(t, beta, key, 1)
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(widget(g, beta, key)).Status).To(Equal(metav1.ConditionTrue))
	}, eventually, poll).Should(Succeed())

	witness := createShopWidget(t, beta, "steady-witness", 1)
	g.Eventually(func(g Gomega) { deployment(g, beta, witness) }, eventually, poll).Should(Succeed())

	// Touch the Deployment without changing what widgethub owns: that
	// triggers a reconcile, which must write neither object. (A label: a
	// changed annotation bumps a Deployment's generation, which the Widget
	// rightly reports as Reconciling until the Deployment controller has
	// observed it.)
	before := widgetReconciles(g)
	logged := len(logs.String())
	d := deployment(g, beta, key)
	d.Labels["example.com/touched"] = "yes"
	g.Expect(beta.Client.Update(context.Background(), d)).To(Succeed())
	deployRV := d.ResourceVersion
	widgetRV := widget(g, beta, key).ResourceVersion
	g.Eventually(func() float64 { return widgetReconciles(g) }, eventually, poll).Should(BeNumerically(">", before))
	// The hub had its chance: a later Deployment event of the same member
	// (on the same watch, so delivered after the touch) was acted on.
	expectDriftUndone(t, beta, witness, 1)
	g.Consistently(func(g Gomega) {
		g.Expect(deployment(g, beta, key).ResourceVersion).To(Equal(deployRV))
		g.Expect(widget(g, beta, key).ResourceVersion).To(Equal(widgetRV))
	}, quietFor, poll).Should(Succeed())
	// Nor did it send an apply that the member found empty: the cache holds
	// all the comparison reads (widget.CacheTransform).
	g.Expect(logs.String()[logged:]).NotTo(MatchRegexp(`Updated Deployment.*"cluster": "beta", "namespace": "shop", "name": "steady",`))
}

func TestNegativeReplicasAreRejected(t *testing.T) {
	alpha := testFleet.Member("alpha")
	ensureNamespace(t, alpha, "shop")
	w := &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "negative"},
		Spec:       v1alpha1.WidgetSpec{Replicas: ptr.To(int32(-1))},
	}
	err := alpha.Client.Create(context.Background(), w)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("creating a Widget with replicas -1: got %v, want an Invalid error", err)
	}
}

func TestChangedKubeconfigMovesTheEngagement(t *testing.T) {
	g := NewWithT(t)
	alpha, gamma := testFleet.Member("alpha"), testFleet.Member("gamma")
	expectUnregistrationsDone(t) // no earlier test's registration of gamma lingers
	register(t, "alpha", alpha)
	moved := createShopWidget(t, gamma, "moved", 1)
	// The hub had its chance: a change made after gamma's Widget, in a
	// member it serves, was acted on.
	expectReconcilesPromptly(t, "moved-witness", 2)
	g.Consistently(func() bool {
		return apierrors.IsNotFound(gamma.Client.Get(context.Background(), moved, &appsv1.Deployment{}))
	}, quietFor, poll).Should(BeTrue(), "gamma is not registered yet")

	// Registration "alpha" now points at gamma's API server.
	register(t, "alpha", gamma)
	g.Eventually(func(g Gomega) { deployment(g, gamma, moved) }, eventually, poll).Should(Succeed())

	// alpha's API server is no longer served under that name: its member was
	// disengaged before gamma was engaged, and a Widget of gamma (served as
	// "alpha") created after alpha's Widget is reconciled first.
	left := createShopWidget(t, alpha, "left-behind", 1)
	after := createShopWidget(t, gamma, "after-left-behind", 1)
	g.Eventually(func(g Gomega) { deployment(g, gamma, after) }, eventually, poll).Should(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(alpha.Client.Get(context.Background(), left, &appsv1.Deployment{}))
	}, quietFor, poll).Should(BeTrue())

	// Pointing it back re-engages alpha, and the Widget made meanwhile is reconciled.
	register(t, "alpha", alpha)
	g.Eventually(func(g Gomega) { deployment(g, alpha, left) }, eventually, poll).Should(Succeed())
}

func TestDeletedSecretDisengagesTheMember(t *testing.T) {
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	// No earlier registration of gamma lingers, and beta, whose changes show
	// that the hub is at work, is engaged before the snapshot.
	expectUnregistrationsDone(t)
	register(t, "beta", testFleet.Member("beta"))
	expectMemberReady(t, "beta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	// An Event broadcaster, the hub's and each member's, starts with its
	// first Event and lives as long as its manager or member: a Widget of
	// beta's reconciled now starts those of the hub and of beta, so that
	// this test passes alone as it does after others.
	expectReconcilesPromptly(t, "temporary-witness", 1)
	// None of the goroutines the member starts may outlive it.
	before := takeGoroutineSnapshot()

	register(t, "temporary", gamma)
	key := createShopWidget(t, gamma, "ephemeral", 1)
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To(int32(1))))
	}, eventually, poll).Should(Succeed())
	// Its MemberCluster is written once it is engaged: its deletion below is
	// then the hub's answer to the unregistration.
	expectMemberReady(t, "temporary", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	unregister(t, "temporary")
	// The member is gone for the manager once its MemberCluster is: a change
	// made then is not acted on, although the hub acts on a later change in
	// a member it serves.
	expectUnregistered(t, "temporary")
	w := widget(g, gamma, key)
	w.Spec.Replicas = ptr.To(*w.Spec.Replicas + 1)
	g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())
	expectReconcilesPromptly(t, "temporary-witness", 2)
	g.Consistently(func(g Gomega) {
		g.Expect(deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To(int32(1))))
	}, quietFor, poll).Should(Succeed(), "a change in an unregistered member was reconciled")

	expectNoneLeftSince(t, before)
}

// expectDriftUndone changes the replicas of key's Deployment in cp behind the
// hub's back and waits until the hub has set them back to want: proof that
// the hub acted on this Deployment event of cp, and so had its chance at the
// Deployment events of cp before it.
func expectDriftUndone(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, want int32) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		d := deployment(g, cp, key)
		d.Spec.Replicas = ptr.To(want + 5)
		g.Expect(cp.Client.Update(context.Background(), d)).To(Succeed())
	}, eventually, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deployment(g, cp, key).Spec.Replicas).To(Equal(ptr.To(want)))
	}, eventually, poll).Should(Succeed(), "the hub undoes a drift of Deployment %s in %s", key, cp.Name)
}
