package members_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/providers/members"
)

// A status computed from a MemberCluster as it was read is written only
// onto that version, so that a stale read never puts back the conditions it
// read over newer ones. When the read was behind (the cache had not seen
// the registration's own last write), the status is computed again from the
// API server's copy and written; when another registration has taken the
// MemberCluster over meanwhile (a ClusterProfile once a Secret of the same
// name went, say), nothing is written and the conflict is returned.
func TestStatusIsNotWrittenOverANewerOne(t *testing.T) {
	const name = "stale-status"
	ctx, hub := t.Context(), testFleet.Hub.Client
	owner, mc := memberClusterOwnedByAnother(t, name)
	setCondition := func(c metav1.Condition) {
		t.Helper()
		c.LastTransitionTime = metav1.Now()
		meta.SetStatusCondition(&mc.Status.Conditions, c)
		if err := hub.Status().Update(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	get := func() {
		t.Helper()
		if err := hub.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
			t.Fatal(err)
		}
	}
	setCondition(metav1.Condition{Type: v1alpha1.MemberReady, Status: metav1.ConditionFalse, Reason: v1alpha1.MemberUnreachableReason, Message: "unreachable"})
	read := mc.DeepCopy()
	// A newer write, of a condition type the engine never writes itself:
	// any status write but one computed from the stale read keeps it.
	setCondition(metav1.Condition{Type: "Newer", Status: metav1.ConditionTrue, Reason: "WrittenAfterTheRead", Message: "newer"})

	if err := members.RecordEngagedOver(ctx, hub, owner, read); err != nil {
		t.Errorf("a status computed from a stale read of a MemberCluster its registration still controls: %v, want it computed again and written", err)
	}
	get()
	if !meta.IsStatusConditionTrue(mc.Status.Conditions, v1alpha1.MemberReady) || meta.FindStatusCondition(mc.Status.Conditions, "Newer") == nil {
		t.Errorf("after a write from a stale read the status is %v; want Ready True and the newer condition kept", mc.Status.Conditions)
	}

	// Read while the member was unreachable (so that the engaged
	// observation has something to write), then another registration takes
	// the MemberCluster over and resets its status.
	setCondition(metav1.Condition{Type: v1alpha1.MemberReady, Status: metav1.ConditionFalse, Reason: v1alpha1.MemberUnreachableReason, Message: "unreachable"})
	read = mc.DeepCopy()
	taker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-taker", Namespace: hubNS}}
	if err := hub.Create(ctx, taker); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), taker) })
	mc.OwnerReferences = nil
	if err := controllerutil.SetControllerReference(taker, mc, hub.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := hub.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	mc.Status = v1alpha1.MemberClusterStatus{}
	setCondition(metav1.Condition{Type: "Newer", Status: metav1.ConditionTrue, Reason: "TakenOver", Message: "the taker's"})

	if err := members.RecordEngagedOver(ctx, hub, owner, read); !apierrors.IsConflict(err) {
		t.Errorf("a status computed before another registration took the MemberCluster over was written (error %v), want a conflict", err)
	}
	get()
	if meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady) != nil || meta.FindStatusCondition(mc.Status.Conditions, "Newer") == nil {
		t.Errorf("the MemberCluster taken over shows %v; want the taker's status alone", mc.Status.Conditions)
	}
}
