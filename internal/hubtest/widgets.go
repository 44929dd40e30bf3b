package hubtest

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EnsureNamespace creates the namespace name in cp unless it exists.
func EnsureNamespace(t *testing.T, cp *fleet.ControlPlane, name string) {
	t.Helper()
	if err := fleet.EnsureNamespace(context.Background(), cp.Client, name); err != nil {
		t.Fatal(err)
	}
}

// CreateWidget creates the Widget ns/name in cp with replicas; it is
// deleted, with its Deployment, when the test ends.
func CreateWidget(t *testing.T, cp *fleet.ControlPlane, ns, name string, replicas int32) *v1alpha1.Widget {
	t.Helper()
	EnsureNamespace(t, cp, ns)
	w := &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.WidgetSpec{Replicas: ptr.To(replicas)},
	}
	if err := cp.Client.Create(context.Background(), w); err != nil {
		t.Fatalf("create Widget %s/%s in %s: %v", ns, name, cp.Name, err)
	}
	t.Cleanup(func() { DeleteWidget(t, cp, types.NamespacedName{Namespace: ns, Name: name}) })
	return w
}

// CreateShopWidget creates the Widget shop/name in cp with replicas and returns its key.
func CreateShopWidget(t *testing.T, cp *fleet.ControlPlane, name string, replicas int32) types.NamespacedName {
	t.Helper()
	CreateWidget(t, cp, "shop", name, replicas)
	return types.NamespacedName{Namespace: "shop", Name: name}
}

// DeleteWidget deletes the Widget key of cp and its Deployment (envtest runs
// no garbage collector).
func DeleteWidget(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName) {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
	for _, obj := range []client.Object{&v1alpha1.Widget{ObjectMeta: meta}, &appsv1.Deployment{ObjectMeta: meta}} {
		if err := cp.Client.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %T %s in %s: %v", obj, key, cp.Name, err)
		}
	}
}

// Widget reads the Widget key of cp.
func Widget(g Gomega, cp *fleet.ControlPlane, key types.NamespacedName) *v1alpha1.Widget {
	w := &v1alpha1.Widget{}
	g.Expect(cp.Client.Get(context.Background(), key, w)).To(Succeed())
	return w
}

// Deployment returns the member's Deployment for key, failing g when it is missing.
func Deployment(g Gomega, cp *fleet.ControlPlane, key types.NamespacedName) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(cp.Client.Get(context.Background(), key, d)).To(Succeed())
	return d
}

// SetReplicas changes a Widget's spec.replicas in cp.
func SetReplicas(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, replicas int32) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		w := Widget(g, cp, key)
		w.Spec.Replicas = ptr.To(replicas)
		g.Expect(cp.Client.Update(context.Background(), w)).To(Succeed())
	}, Within, Poll).Should(Succeed())
}

// ExpectReplicas waits, up to within, until the Deployment of the Widget
// key in cp has replicas.
func ExpectReplicas(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, replicas int32, within time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(Deployment(g, cp, key).Spec.Replicas).To(Equal(ptr.To(replicas)))
	}, within, Poll).Should(Succeed(), "Deployment %s in %s", key, cp.Name)
}

// SetAvailable plays the Deployment controller's part: it reports n available replicas.
func SetAvailable(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, n int32) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		d := Deployment(g, cp, key)
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = n, n, n, n
		d.Status.ObservedGeneration = d.Generation
		g.Expect(cp.Client.Status().Update(context.Background(), d)).To(Succeed())
	}, Within, Poll).Should(Succeed())
}

// ExpectWidgetStatus waits until the Widget key of cp reports available
// replicas and a Ready condition of status, with reason and message unless
// they are empty.
func ExpectWidgetStatus(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, available int32, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		w := Widget(g, cp, key)
		g.Expect(w.Status.AvailableReplicas).To(Equal(available))
		ready := ReadyCondition(w)
		g.Expect(ready).NotTo(BeNil(), "Ready of Widget %s", key)
		g.Expect(ready.Status).To(Equal(status))
		if reason != "" {
			g.Expect(ready.Reason).To(Equal(reason))
		}
		if message != "" {
			g.Expect(ready.Message).To(Equal(message))
		}
	}, Within, Poll).Should(Succeed())
}

// ReadyCondition is w's Ready condition, nil when it has none.
func ReadyCondition(w *v1alpha1.Widget) *metav1.Condition {
	return meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WidgetReady)
}

// DenyDeploymentWritesInForce makes cp's API server refuse every Deployment
// create and update in namespace ns (fleet.RefuseDeployments): a member that
// answers its probes but whose writes all fail. It returns once the refusal
// is in force, with the function that lifts it (also when t ends).
func DenyDeploymentWritesInForce(t *testing.T, cp *fleet.ControlPlane, ns string) (lift func()) {
	t.Helper()
	liftPolicy, err := cp.RefuseDeployments(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	lift = func() {
		once.Do(func() {
			if err := liftPolicy(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(lift)
	return lift
}
