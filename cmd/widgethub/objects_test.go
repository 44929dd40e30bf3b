//go:build scenarios

package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// A member whose caches would hold more than --member-max-objects is parked
// and reported TooManyObjects while another member keeps being served; once
// it holds fewer it is engaged again, its count starting from zero.
func TestMemberPastItsObjectBoundIsParked(t *testing.T) {
	ctx := t.Context()
	ns := hubNamespace(t, "objects")
	big, small := testFleet.Member("east"), testFleet.Member("west")
	// Other tests' Widgets (and their Deployments) count too.
	bound := 2*max(countWidgets(t, big), countWidgets(t, small)) + 20
	registerMember(t, ns, "big", big)
	registerMember(t, ns, "small", small)
	addr, err := fleet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := fleet.StartProcess(managerBinary, filepath.Join(t.TempDir(), "manager.log"),
		"--kubeconfig", hubKubeconfig, "--registration-namespace", ns, "--leader-elect=false",
		"--metrics-bind-address", addr, "--metrics-secure=false", "--health-probe-bind-address", "0",
		"--member-max-objects", strconv.Itoa(bound))
	if err != nil {
		t.Fatal(err)
	}
	killAtEnd(t, "the manager", proc)
	waitFor(t, 60*time.Second, "both members engaged", func(ctx context.Context) error {
		for _, name := range []string{"big", "small"} {
			if err := memberReason(ctx, ns, name, v1alpha1.MemberEngagedReason); err != nil {
				return err
			}
		}
		return nil
	})

	// The big member gets more Widgets than the bound; its watch brings
	// them, and their Deployments, to the hub.
	if err := fleet.CreateWidgets(ctx, big.Client, ns, "many", bound, 8); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 60*time.Second, "big reported TooManyObjects", func(ctx context.Context) error {
		return memberReason(ctx, ns, "big", v1alpha1.MemberTooManyObjectsReason)
	})
	t.Logf("bound %d: %d Widgets created in big; reported TooManyObjects %s after", bound, bound, took.Round(time.Millisecond))

	// The small member is served meanwhile.
	if err := fleet.CreateWidgets(ctx, small.Client, ns, "served", 1, 1); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, 10*time.Second, "small's new Widget reconciled", func(ctx context.Context) error {
		return small.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleet.WidgetName("served", 0)}, &appsv1.Deployment{})
	})
	t.Logf("small's new Widget reconciled in %s while big is parked", took.Round(time.Millisecond))
	if err := memberReason(ctx, ns, "small", v1alpha1.MemberEngagedReason); err != nil {
		t.Fatal(err)
	}

	// Fewer objects: big is engaged again, counted from zero. The
	// Deployments the hub wrote before it parked big go with their Widgets,
	// as a cluster's garbage collector would take them (envtest runs none):
	// left behind (20 in one CI run; how many is a race with the parking),
	// they kept big at its bound, and the new Widget below parked it again.
	if err := big.Client.DeleteAllOf(ctx, &v1alpha1.Widget{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := big.Client.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, 100*time.Second, "big engaged again", func(ctx context.Context) error {
		return memberReason(ctx, ns, "big", v1alpha1.MemberEngagedReason)
	})
	t.Logf("big engaged again %s after its Widgets were deleted", took.Round(time.Millisecond))
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after"}, Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](1)}}
	if err := big.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "big's new Widget reconciled", func(ctx context.Context) error {
		return big.Client.Get(ctx, client.ObjectKeyFromObject(w), &appsv1.Deployment{})
	})
}

func countWidgets(t *testing.T, member *fleet.ControlPlane) int {
	t.Helper()
	list := &v1alpha1.WidgetList{}
	if err := member.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// memberReason fails unless the MemberCluster name in ns shows Ready with reason.
func memberReason(ctx context.Context, ns, name, reason string) error {
	mc := &v1alpha1.MemberCluster{}
	if err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
		return err
	}
	ready := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberReady)
	if ready == nil || ready.Reason != reason {
		return fmt.Errorf("MemberCluster %s: Ready %+v, want reason %s", name, ready, reason)
	}
	return nil
}
