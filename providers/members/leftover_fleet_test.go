package members_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/hubtest"
)

// A MemberCluster that another registration of the same name left behind
// (on a sharded hub, a ClusterProfile that a replica served for a moment
// before it saw the Secret that keeps the name) is taken over by the
// registration that is served: it is owned by that one, does not go with
// the one that left it, and no longer shows what that one's member showed.
func TestMemberClusterLeftByAnotherRegistrationIsOwnedByTheServedOne(t *testing.T) {
	const name = "leftover"
	ctx, hub := t.Context(), testFleet.Hub.Client
	_, left := memberClusterOwnedByAnother(t, name)
	// A status about the other registration's member, with a condition of
	// a type the engine never writes: it survives any status write but a
	// reset.
	left.Status.Conditions = []metav1.Condition{{Type: "LeftBehind", Status: metav1.ConditionTrue, Reason: "OtherRegistration",
		Message: "written for the registration that left this MemberCluster", LastTransitionTime: metav1.Now()}}
	if err := hub.Status().Update(ctx, left); err != nil {
		t.Fatal(err)
	}

	hubtest.Register(t, name, testFleet.Member("beta"))
	t.Cleanup(func() { hubtest.Unregister(t, name) })
	mc := hubtest.ExpectMemberReady(t, name, metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	secret := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	if mc.UID != left.UID {
		t.Errorf("the MemberCluster was created again (uid %s, was %s), want the one left behind taken over", mc.UID, left.UID)
	}
	controller := metav1.GetControllerOf(mc)
	if controller == nil || controller.Kind != "Secret" || controller.UID != secret.UID {
		t.Errorf("MemberCluster %s is controlled by %+v, want its Secret (uid %s)", name, controller, secret.UID)
	}
	if c := meta.FindStatusCondition(mc.Status.Conditions, "LeftBehind"); c != nil {
		t.Errorf("MemberCluster %s still shows the status left behind: %+v", name, c)
	}
	if len(mc.OwnerReferences) != 1 {
		t.Errorf("MemberCluster %s has owners %+v, want its Secret alone", name, mc.OwnerReferences)
	}
}

// memberClusterOwnedByAnother creates on the hub a MemberCluster called name
// whose controller is owner, a ConfigMap of the same name standing for a
// registration of another kind; both go when the test ends.
func memberClusterOwnedByAnother(t *testing.T, name string) (owner *corev1.ConfigMap, mc *v1alpha1.MemberCluster) {
	t.Helper()
	ctx, hub := t.Context(), testFleet.Hub.Client
	owner = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNS}}
	if err := hub.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), owner) })
	mc = &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNS}}
	if err := controllerutil.SetControllerReference(owner, mc, hub.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), mc) })
	return owner, mc
}
