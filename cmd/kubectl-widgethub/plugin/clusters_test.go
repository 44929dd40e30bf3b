package plugin_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// createMemberCluster writes mc on the hub as the hub does (the object, then
// its status), and deletes it when t ends: the hub's manager does not run
// in these tests.
func createMemberCluster(t *testing.T, mc *v1alpha1.MemberCluster) {
	t.Helper()
	ctx := context.Background()
	status := mc.Status
	if err := testFleet.Hub.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testFleet.Hub.Client.Delete(ctx, mc) })
	mc.Status = status
	if err := testFleet.Hub.Client.Status().Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
}

// profileMemberCluster is the MemberCluster the hub writes for the
// ClusterProfile name, with status.
func profileMemberCluster(name string, status v1alpha1.MemberClusterStatus) *v1alpha1.MemberCluster {
	return &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "multicluster.x-k8s.io/v1alpha1", Kind: "ClusterProfile",
			Name: name, UID: uuid.NewUUID(), Controller: ptr.To(true)}}}, Status: status}
}

// engaged is the status of an engaged member with widgets Widgets.
func engaged(widgets int32) v1alpha1.MemberClusterStatus {
	return v1alpha1.MemberClusterStatus{
		Conditions: []metav1.Condition{{Type: v1alpha1.MemberReady, Status: metav1.ConditionTrue, Reason: v1alpha1.MemberEngagedReason,
			Message: "the member answers its probes", LastTransitionTime: metav1.Now()}},
		KubernetesVersion: "v1.36.3", Widgets: widgets, LastProbeTime: ptr.To(metav1.Now()),
	}
}

func TestClustersListsClusterProfileMembers(t *testing.T) {
	// As the hub writes it for a ClusterProfile: no registration Secret.
	createMemberCluster(t, profileMemberCluster("inventoried", engaged(3)))

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
