package plugin_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

func TestClustersListsClusterProfileMembers(t *testing.T) {
	ctx := context.Background()
	// As the hub writes it for a ClusterProfile: no registration Secret.
	mc := &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "inventoried",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "multicluster.x-k8s.io/v1alpha1", Kind: "ClusterProfile",
			Name: "inventoried", UID: types.UID("5f1c7c9e-0000-4000-8000-000000000001"), Controller: ptr.To(true)}}}}
	if err := testFleet.Hub.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(ctx, mc) })
	mc.Status = v1alpha1.MemberClusterStatus{
		Conditions:        []metav1.Condition{{Type: v1alpha1.MemberReady, Status: metav1.ConditionTrue, Reason: v1alpha1.MemberEngagedReason, LastTransitionTime: metav1.Now()}},
		KubernetesVersion: "v1.36.3", Widgets: 3, LastProbeTime: ptr.To(metav1.Now()),
	}
	if err := testFleet.Hub.Client.Status().Update(ctx, mc); err != nil {
		t.Fatal(err)
	}

	r := mustRun(t, "clusters")
	for _, cells := range rows(r.stdout) {
		if cells[0] == "inventoried" {
			if got := strings.Join(cells[:8], " "); got != "inventoried True Engaged v1.36.3 3 (ClusterProfile) - -" {
				t.Errorf("row = %q", got)
			}
			return
		}
	}
	t.Fatalf("clusters does not list the ClusterProfile's member:\n%s", r.stdout)
}
