//go:build scenarios

package main_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
	"github.com/widgethub/widgethub/providers/sharding"
)

// Three sharded replicas serve members registered by Secrets and by
// ClusterProfiles alike: every member by one replica, each replica within
// one of its fair share of both kinds together; a name that a Secret and a
// ClusterProfile both register is served once, as the Secret's, on every
// replica; and a killed replica's ClusterProfile members are served again as
// soon as its Secret members.
func TestShardedHubServesClusterProfileMembersLikeSecretOnes(t *testing.T) {
	ctx := t.Context()
	ns := hubNamespace(t, "profiles")
	if err := testFleet.Hub.InstallClusterProfileCRD(); err != nil {
		t.Fatal(err)
	}
	scheme := clusters.NewScheme()
	if err := inventoryv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hub, err := client.New(testFleet.Hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	access, err := fleet.NewAccessProvider(t.TempDir(), "widgethub-tokens")
	if err != nil {
		t.Fatal(err)
	}
	profile := func(name string, member *fleet.ControlPlane) {
		t.Helper()
		token, err := member.AdminToken(ctx, ns+"-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if err := access.Grant(name, member.Config.Host, token); err != nil {
			t.Fatal(err)
		}
		if err := fleet.CreateClusterProfile(ctx, hub, ns, name, access.Entry(name, member)); err != nil {
			t.Fatal(err)
		}
	}

	const secrets, profiles = 6, 6
	kinds := map[string]string{}
	for i := range secrets {
		name := fmt.Sprintf("secret-%d", i)
		registerMember(t, ns, name, testFleet.Members[i%2])
		kinds[name] = "Secret"
	}
	for i := range profiles {
		name := fmt.Sprintf("profile-%d", i)
		profile(name, testFleet.Members[i%2])
		kinds[name] = "ClusterProfile"
	}
	// A ClusterProfile pins its member as a Secret does.
	pinned := &inventoryv1alpha1.ClusterProfile{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "profile-0"}, pinned); err != nil {
		t.Fatal(err)
	}
	pinned.Annotations = map[string]string{registration.PinAnnotation: "p2"}
	if err := hub.Update(ctx, pinned); err != nil {
		t.Fatal(err)
	}
	// twin is registered twice: the Secret keeps the name on every replica.
	registerMember(t, ns, "twin", testFleet.Members[0])
	profile("twin", testFleet.Members[1])
	kinds["twin"] = "Secret"

	flags := []string{"--clusterprofile-provider-file=" + access.File}
	replicas := []*replica{startReplicaWith(t, ns, "p1", hubKubeconfig, flags...),
		startReplicaWith(t, ns, "p2", hubKubeconfig, flags...), startReplicaWith(t, ns, "p3", hubKubeconfig, flags...)}
	before := settled(t, ns, len(kinds), replicas, 2*time.Minute)
	checkOwners(t, ns, kinds)
	if before["profile-0"] != "p2" {
		t.Errorf("the ClusterProfile pinned to p2 is served by %q", before["profile-0"])
	}
	mc := &v1alpha1.MemberCluster{}
	if err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "profile-0"}, mc); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(mc.Status.Conditions, v1alpha1.MemberPinned) {
		t.Errorf("the pinned ClusterProfile's MemberCluster shows %+v", meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberPinned))
	}

	// SIGKILL the replica that serves the most ClusterProfile members (at
	// least one of each kind, to compare them).
	var killed *replica
	var victims map[string]string
	for _, r := range replicas {
		mine := map[string]string{}
		for _, name := range servedByReplica(before, r.id) {
			mine[name] = kinds[name]
		}
		if countKind(mine, "ClusterProfile") > 0 && countKind(mine, "Secret") > 0 &&
			(victims == nil || countKind(mine, "ClusterProfile") > countKind(victims, "ClusterProfile")) {
			killed, victims = r, mine
		}
	}
	if killed == nil {
		t.Fatalf("no replica serves members of both kinds: %v", before)
	}
	_ = killed.Signal(syscall.SIGKILL)
	<-killed.Exited()
	took := servedAgain(t, ns, victims, killed.id)
	bound := sharding.DefaultLeaseDuration + 5*time.Second
	for kind, d := range took {
		t.Logf("SIGKILL of %s: its %d %s members served again %s after the kill", killed.id, countKind(victims, kind), kind, d.Round(100*time.Millisecond))
		if d > bound {
			t.Errorf("%s members served again %s after the kill, want within the lease duration + 5s (%s)", kind, d, bound)
		}
	}
	if gap := took["ClusterProfile"] - took["Secret"]; gap > 2*time.Second {
		t.Errorf("ClusterProfile members taken over %s later than Secret ones (%s, %s)", gap, took["ClusterProfile"], took["Secret"])
	}
	var survivors []*replica
	for _, r := range replicas {
		if r != killed {
			survivors = append(survivors, r)
		}
	}
	settled(t, ns, len(kinds), survivors, time.Minute)
	checkOwners(t, ns, kinds)
}

func countKind(members map[string]string, kind string) int {
	n := 0
	for _, k := range members {
		if k == kind {
			n++
		}
	}
	return n
}

// checkOwners waits (hubtest.Within) until each member's MemberCluster is
// owned by the registration of the kind kinds says, and the twin's shows
// the conflict with the ClusterProfile that waits: the replica that serves
// the twin writes the conflict once it has seen both registrations, which
// may be a moment after the members settled.
func checkOwners(t *testing.T, ns string, kinds map[string]string) {
	t.Helper()
	waitFor(t, hubtest.Within, "every MemberCluster owned by its registration, the twin's showing the conflict", func(ctx context.Context) error {
		return ownerProblems(ctx, ns, kinds)
	})
}

// ownerProblems is what differs from the owners and conflict checkOwners waits for.
func ownerProblems(ctx context.Context, ns string, kinds map[string]string) error {
	var problems []error
	list := &v1alpha1.MemberClusterList{}
	if err := testFleet.Hub.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, mc := range list.Items {
		owner := metav1.GetControllerOf(&mc)
		if owner == nil || owner.Kind != kinds[mc.Name] {
			problems = append(problems, fmt.Errorf("MemberCluster %s is owned by %v, want its %s", mc.Name, owner, kinds[mc.Name]))
		}
		if mc.Name != "twin" {
			continue
		}
		if c := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberNameConflict); c == nil || c.Status != metav1.ConditionTrue ||
			!strings.Contains(c.Message, "ClusterProfile") {
			problems = append(problems, fmt.Errorf("twin's NameConflict condition: %+v", c))
		}
	}
	if len(list.Items) != len(kinds) {
		problems = append(problems, fmt.Errorf("%d MemberClusters for %d member names", len(list.Items), len(kinds)))
	}
	return errors.Join(problems...)
}

// servedAgain waits until every member of victims (name -> kind) is Ready
// and served by another replica than gone, and returns, per kind, how long
// after the call its last member took.
func servedAgain(t *testing.T, ns string, victims map[string]string, gone string) map[string]time.Duration {
	t.Helper()
	start := time.Now()
	took := map[string]time.Duration{}
	left := len(victims)
	seen := map[string]bool{}
	waitFor(t, time.Minute, "the killed replica's members served by the others", func(ctx context.Context) error {
		served, err := servedBy(ctx, ns)
		if err != nil {
			return err
		}
		for name, kind := range victims {
			if r := served[name]; !seen[name] && r != "" && r != gone {
				seen[name] = true
				took[kind] = time.Since(start)
				left--
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of %d members not served again", left, len(victims))
		}
		return nil
	})
	return took
}
