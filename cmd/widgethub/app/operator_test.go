package app_test

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

func TestRegisteredMembersGetDeploymentsIndependently(t *testing.T) {
	g := NewWithT(t)
	alpha, beta := testFleet.Member("alpha"), testFleet.Member("beta")
	hubtest.Register(t, "alpha", alpha)
	hubtest.Register(t, "beta", beta)

	key := hubtest.CreateShopWidget(t, alpha, "cart", 2)
	hubtest.CreateWidget(t, beta, key.Namespace, key.Name, 3)

	for _, c := range []struct {
		member   *fleet.ControlPlane
		replicas int32
	}{{alpha, 2}, {beta, 3}} {
		g.Eventually(func(g Gomega) {
			w := hubtest.Widget(g, c.member, key)
			d := hubtest.Deployment(g, c.member, key)
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
			ready := hubtest.ReadyCondition(w)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.WidgetProgressingReason))
		}, hubtest.Within, hubtest.Poll).Should(Succeed())
	}

	// Only alpha's Deployment becomes available: only alpha's Widget turns Ready.
	hubtest.SetAvailable(t, alpha, key, 2)
	hubtest.ExpectWidgetStatus(t, alpha, key, 2, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, "")
	w := hubtest.Widget(g, beta, key)
	g.Expect(hubtest.ReadyCondition(w).Status).To(Equal(metav1.ConditionFalse))
}

func TestWidgetFollowsSpecAndDeployment(t *testing.T) {
	g := NewWithT(t)
	alpha := testFleet.Member("alpha")
	hubtest.Register(t, "alpha", alpha)
	key := hubtest.CreateShopWidget(t, alpha, "scaler", 1)
	var firstUID types.UID
	g.Eventually(func(g Gomega) {
		firstUID = hubtest.Deployment(g, alpha, key).UID
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	// A changed spec.replicas reaches the Deployment.
	g.Eventually(func(g Gomega) {
		w := hubtest.Widget(g, alpha, key)
		w.Spec.Replicas = ptr.To(int32(4))
		g.Expect(alpha.Client.Update(context.Background(), w)).To(Succeed())
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, alpha, key).Spec.Replicas).To(Equal(ptr.To(int32(4))))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	// A deleted Deployment comes back.
	g.Expect(alpha.Client.Delete(context.Background(), hubtest.Deployment(g, alpha, key))).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := hubtest.Deployment(g, alpha, key)
		g.Expect(d.UID).NotTo(Equal(firstUID))
		g.Expect(d.Spec.Replicas).To(Equal(ptr.To(int32(4))))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	// Deployment status drives the Widget's status, both ways.
	hubtest.SetAvailable(t, alpha, key, 4)
	hubtest.ExpectWidgetStatus(t, alpha, key, 4, metav1.ConditionTrue, "", "")
	hubtest.SetAvailable(t, alpha, key, 3)
	hubtest.ExpectWidgetStatus(t, alpha, key, 3, metav1.ConditionFalse, "", "3/4 replicas available")
}

// widgetReconciles is how many Widget reconciles the manager has finished.
func widgetReconciles(g Gomega) float64 {
	return hubtest.CounterSum(g, "controller_runtime_reconcile_total", "controller", "widget")
}

// queueCounts are the shared queue's counters and the Widget controller's
// reconciles, as the manager's metrics registry reports them.
type queueCounts struct {
	adds, handedOut, done, reconciles, depth, active float64
}

func readQueueCounts(g Gomega) queueCounts {
	series, err := hubtest.SeriesLabelled("name", "widget")
	g.Expect(err).NotTo(HaveOccurred())
	one := func(family string) *dto.Metric {
		g.Expect(series[family]).To(HaveLen(1), "series of %s{name=\"widget\"}", family)
		return series[family][0]
	}
	active, _ := hubtest.GaugeValue(g, "controller_runtime_active_workers", "controller", "widget")
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
		time.Sleep(hubtest.Poll)
		g.Expect(readQueueCounts(g)).To(Equal(c))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "the shared queue never went quiet")
	return c
}

// The shared queue's metrics account for every request exactly: between two
// quiet moments, each request added was handed out once, done once, and
// reconciled once by the Widget controller.
func TestSharedQueueReportsMetrics(t *testing.T) {
	g := NewWithT(t)
	alpha := testFleet.Member("alpha")
	hubtest.Register(t, "alpha", alpha)
	hubtest.ExpectMemberReady(t, "alpha", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	before := quietQueueCounts(t)

	key := hubtest.CreateShopWidget(t, alpha, "counted", 1)
	g.Eventually(func(g Gomega) {
		w := hubtest.Widget(g, alpha, key)
		g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))
		hubtest.Deployment(g, alpha, key)
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
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
	hubtest.Register(t, "beta", beta)
	key := hubtest.CreateShopWidget(t, beta, "steady", 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, beta, key) }, hubtest.Within, hubtest.Poll).Should(Succeed())
	hubtest.SetAvailable(t, beta, key, 1)
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.ReadyCondition(hubtest.Widget(g, beta, key)).Status).To(Equal(metav1.ConditionTrue))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	witness := hubtest.CreateShopWidget(t, beta, "steady-witness", 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, beta, witness) }, hubtest.Within, hubtest.Poll).Should(Succeed())

	// Touch the Deployment without changing what widgethub owns: that
	// triggers a reconcile, which must write neither object. (A label: a
	// changed annotation bumps a Deployment's generation, which the Widget
	// rightly reports as Reconciling until the Deployment controller has
	// observed it.)
	before := widgetReconciles(g)
	logged := len(hubtest.Logs.String())
	d := hubtest.Deployment(g, beta, key)
	d.Labels["example.com/touched"] = "yes"
	g.Expect(beta.Client.Update(context.Background(), d)).To(Succeed())
	deployRV := d.ResourceVersion
	widgetRV := hubtest.Widget(g, beta, key).ResourceVersion
	g.Eventually(func() float64 { return widgetReconciles(g) }, hubtest.Within, hubtest.Poll).Should(BeNumerically(">", before))
	// The hub had its chance: a later Deployment event of the same member
	// (on the same watch, so delivered after the touch) was acted on.
	expectDriftUndone(t, beta, witness, 1)
	g.Consistently(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, beta, key).ResourceVersion).To(Equal(deployRV))
		g.Expect(hubtest.Widget(g, beta, key).ResourceVersion).To(Equal(widgetRV))
	}, hubtest.QuietFor, hubtest.Poll).Should(Succeed())
	// Nor did it send an apply that the member found empty: the cache holds
	// all the comparison reads (widget.CacheTransform).
	g.Expect(hubtest.Logs.String()[logged:]).NotTo(MatchRegexp(`Updated Deployment.*"cluster": "beta", "namespace": "shop", "name": "steady",`))
}

func TestNegativeReplicasAreRejected(t *testing.T) {
	alpha := testFleet.Member("alpha")
	hubtest.EnsureNamespace(t, alpha, "shop")
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
	hubtest.ExpectUnregistrationsDone(t) // no earlier test's registration of gamma lingers
	hubtest.Register(t, "alpha", alpha)
	moved := hubtest.CreateShopWidget(t, gamma, "moved", 1)
	// The hub had its chance: a change made after gamma's Widget, in a
	// member it serves, was acted on.
	hubtest.ExpectReconcilesPromptly(t, "moved-witness", 2)
	g.Consistently(func() bool {
		return apierrors.IsNotFound(gamma.Client.Get(context.Background(), moved, &appsv1.Deployment{}))
	}, hubtest.QuietFor, hubtest.Poll).Should(BeTrue(), "gamma is not registered yet")

	// Registration "alpha" now points at gamma's API server.
	hubtest.Register(t, "alpha", gamma)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, gamma, moved) }, hubtest.Within, hubtest.Poll).Should(Succeed())

	// alpha's API server is no longer served under that name: its member was
	// disengaged before gamma was engaged, and a Widget of gamma (served as
	// "alpha") created after alpha's Widget is reconciled first.
	left := hubtest.CreateShopWidget(t, alpha, "left-behind", 1)
	after := hubtest.CreateShopWidget(t, gamma, "after-left-behind", 1)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, gamma, after) }, hubtest.Within, hubtest.Poll).Should(Succeed())
	g.Consistently(func() bool {
		return apierrors.IsNotFound(alpha.Client.Get(context.Background(), left, &appsv1.Deployment{}))
	}, hubtest.QuietFor, hubtest.Poll).Should(BeTrue())

	// Pointing it back re-engages alpha, and the Widget made meanwhile is reconciled.
	hubtest.Register(t, "alpha", alpha)
	g.Eventually(func(g Gomega) { hubtest.Deployment(g, alpha, left) }, hubtest.Within, hubtest.Poll).Should(Succeed())
}

func TestDeletedSecretDisengagesTheMember(t *testing.T) {
	g := NewWithT(t)
	gamma := testFleet.Member("gamma")
	// No earlier registration of gamma lingers, and beta, whose changes show
	// that the hub is at work, is engaged before the snapshot.
	hubtest.ExpectUnregistrationsDone(t)
	hubtest.Register(t, "beta", testFleet.Member("beta"))
	hubtest.ExpectMemberReady(t, "beta", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	// An Event broadcaster, the hub's and each member's, starts with its
	// first Event and lives as long as its manager or member: a Widget of
	// beta's reconciled now starts those of the hub and of beta, so that
	// this test passes alone as it does after others.
	hubtest.ExpectReconcilesPromptly(t, "temporary-witness", 1)
	// None of the goroutines the member starts may outlive it.
	before := hubtest.TakeGoroutineSnapshot()

	hubtest.Register(t, "temporary", gamma)
	key := hubtest.CreateShopWidget(t, gamma, "ephemeral", 1)
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To(int32(1))))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	// Its MemberCluster is written once it is engaged: its deletion below is
	// then the hub's answer to the unregistration.
	hubtest.ExpectMemberReady(t, "temporary", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)

	hubtest.Unregister(t, "temporary")
	// The member is gone for the manager once its MemberCluster is: a change
	// made then is not acted on, although the hub acts on a later change in
	// a member it serves.
	hubtest.ExpectUnregistered(t, "temporary")
	w := hubtest.Widget(g, gamma, key)
	w.Spec.Replicas = ptr.To(*w.Spec.Replicas + 1)
	g.Expect(gamma.Client.Update(context.Background(), w)).To(Succeed())
	hubtest.ExpectReconcilesPromptly(t, "temporary-witness", 2)
	g.Consistently(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, gamma, key).Spec.Replicas).To(Equal(ptr.To(int32(1))))
	}, hubtest.QuietFor, hubtest.Poll).Should(Succeed(), "a change in an unregistered member was reconciled")

	hubtest.ExpectNoneLeftSince(t, before)
}

// expectDriftUndone changes the replicas of key's Deployment in cp behind the
// hub's back and waits until the hub has set them back to want: proof that
// the hub acted on this Deployment event of cp, and so had its chance at the
// Deployment events of cp before it.
func expectDriftUndone(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, want int32) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		d := hubtest.Deployment(g, cp, key)
		d.Spec.Replicas = ptr.To(want + 5)
		g.Expect(cp.Client.Update(context.Background(), d)).To(Succeed())
	}, hubtest.Within, hubtest.Poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubtest.Deployment(g, cp, key).Spec.Replicas).To(Equal(ptr.To(want)))
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "the hub undoes a drift of Deployment %s in %s", key, cp.Name)
}
