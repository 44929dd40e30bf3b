//go:build scenarios

package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/providers/sharding"
)

// Two legal member names that used to share a fence (a 250-character name
// and the 236-character name its fence was shortened to) are both served
// by a sharded hub, each under a fence of its own held by the replica that
// serves it; and registrations pinned to one replica leave the other its
// fair share, the pins not followed (beyond the share, or to a replica that
// is not live) reported on their MemberClusters.
func TestShardedHubFencesEveryNameAndBoundsPins(t *testing.T) {
	const ns = "sharding-names"
	ctx := t.Context()
	if err := fleet.EnsureNamespace(ctx, testFleet.Hub.Client, ns); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("abcdefghij", 25)
	sum := sha256.Sum256([]byte(long))
	twin := long[:219] + "-" + hex.EncodeToString(sum[:8])
	names := []string{long, twin, "pinned-0", "pinned-1", "pinned-2", "pinned-3", "pinned-4", "pinned-gone"}
	for i, name := range names {
		member := testFleet.Members[i%len(testFleet.Members)]
		secret := registration.NewSecret(ns, name, memberKubeconfig(t, member, fmt.Sprintf("%s-%d", ns, i)))
		switch {
		case name == "pinned-gone":
			secret.Annotations = map[string]string{registration.PinAnnotation: "p9"}
		case strings.HasPrefix(name, "pinned-"):
			secret.Annotations = map[string]string{registration.PinAnnotation: "p1"}
		}
		if err := testFleet.Hub.Client.Create(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	startReplica(t, ns, "p1")
	startReplica(t, ns, "p2")

	// 8 members on 2 replicas: 4 each, whatever the 5 pins to p1 ask.
	var served map[string]string
	waitFor(t, 2*time.Minute, "both replicas at their fair share, each long name under a fence of its own", func(ctx context.Context) error {
		var err error
		if served, err = servedBy(ctx, ns); err != nil {
			return err
		}
		count := map[string]int{}
		for _, r := range served {
			count[r]++
		}
		if len(served) != len(names) || count["p1"] != 4 || count["p2"] != 4 {
			return fmt.Errorf("served %d of %d, by replica %v", len(served), len(names), count)
		}
		for _, name := range []string{long, twin} {
			l := &coordinationv1.Lease{}
			if err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sharding.FenceName(name)}, l); err != nil {
				return err
			}
			if got := ptr.Deref(l.Spec.HolderIdentity, ""); got != served[name] || l.Annotations[sharding.ClusterAnnotation] != name {
				return fmt.Errorf("the fence of the %d-character member is held by %q for %d characters; it is served by %q",
					len(name), got, len(l.Annotations[sharding.ClusterAnnotation]), served[name])
			}
		}
		return nil
	})
	if sharding.FenceName(long) == sharding.FenceName(twin) {
		t.Fatal("the two names share a fence")
	}

	// The pins: those p1 took are followed, the others reported.
	waitFor(t, time.Minute, "each pin reported as followed or not", func(ctx context.Context) error {
		list := &v1alpha1.MemberClusterList{}
		if err := testFleet.Hub.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		followed, refused, notLive := 0, 0, 0
		for _, mc := range list.Items {
			cond := meta.FindStatusCondition(mc.Status.Conditions, v1alpha1.MemberPinned)
			switch {
			case !strings.HasPrefix(mc.Name, "pinned-"):
				if cond != nil {
					return fmt.Errorf("%.20s... has no pin but shows %s", mc.Name, cond.Reason)
				}
			case cond == nil:
				return fmt.Errorf("%s shows no Pinned condition", mc.Name)
			case cond.Status == "True" && cond.Reason == v1alpha1.MemberPinHonouredReason && mc.Status.ServedBy == "p1":
				followed++
			case cond.Status == "False" && cond.Reason == v1alpha1.MemberPinBeyondFairShareReason && mc.Status.ServedBy == "p2":
				refused++
			case mc.Name == "pinned-gone" && cond.Status == "False" && cond.Reason == v1alpha1.MemberPinnedReplicaNotLiveReason:
				notLive++
			default:
				return fmt.Errorf("%s served by %s shows Pinned=%s %s", mc.Name, mc.Status.ServedBy, cond.Status, cond.Reason)
			}
		}
		if followed != 4 || refused != 1 || notLive != 1 {
			return fmt.Errorf("%d pins followed, %d reported beyond the fair share, %d to a replica not live", followed, refused, notLive)
		}
		return nil
	})
	t.Logf("served by %v", summarize(served))
}

// summarize shortens the long member names of served for a log line.
func summarize(served map[string]string) map[string]string {
	out := map[string]string{}
	for name, r := range served {
		if len(name) > 40 {
			name = fmt.Sprintf("%s...(%d characters)", name[:12], len(name))
		}
		out[name] = r
	}
	return out
}
