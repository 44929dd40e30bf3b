package members_test

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/hubtest"
	"github.com/widgethub/widgethub/providers/sharding"
)

// Without --sharding the manager is the one of before: it engages every
// member, writes no sharding Lease and shows no servedBy.
func TestShardingOffEngagesEverythingAndWritesNoShardingLease(t *testing.T) {
	hubtest.Register(t, "unsharded", testFleet.Member("beta"))
	t.Cleanup(func() { hubtest.Unregister(t, "unsharded") })
	mc := hubtest.ExpectMemberReady(t, "unsharded", metav1.ConditionTrue, v1alpha1.MemberEngagedReason)
	if mc.Status.ServedBy != "" {
		t.Errorf("status.servedBy = %q without sharding, want empty", mc.Status.ServedBy)
	}
	leases := &coordinationv1.LeaseList{}
	if err := testFleet.Hub.Client.List(t.Context(), leases, client.InNamespace(hubNS), client.HasLabels{sharding.LeaseLabel}); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("%d sharding Leases (e.g. %s) without sharding, want none", len(leases.Items), leases.Items[0].Name)
	}
}
