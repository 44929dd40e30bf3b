package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// What the test allows a replica's peak RSS to grow by over its own
// baseline (measured once it serves the healthy member), while hostile
// members answer a 1 GiB gzip bomb and an endless watch: without the bounds
// either alone takes a manager past the chart's 512 MiB limit.
const hostileRSSAllowance = 150 << 20

// The chart's terminationGracePeriodSeconds: a replica told to stop must
// have handed its members over and exited within it.
const replicaGracePeriod = 40 * time.Second

// A sharded hub of 3 replicas given two hostile registrations, one whose
// server answers /version with a gzip bomb and one whose Widget watch
// streams new objects without end: each is reported with its reason, no
// replica exits, each replica's peak RSS stays within a stated allowance,
// and a healthy member is served meanwhile. Once they are deleted the hub is
// whole: a new member is engaged within seconds, and every replica stops on
// SIGTERM within its grace period.
func TestShardedHubSurvivesAHostileMemberAndRecovers(t *testing.T) {
	ctx := t.Context()
	ns := "hostile-" + strconv.FormatInt(time.Now().Unix()%100000, 10)
	if err := fleet.EnsureNamespace(ctx, testFleet.Hub.Client, ns); err != nil {
		t.Fatal(err)
	}
	east, west := testFleet.Member("east"), testFleet.Member("west")
	for _, m := range []*fleet.ControlPlane{east, west} {
		if err := fleet.EnsureNamespace(ctx, m.Client, ns); err != nil {
			t.Fatal(err)
		}
	}
	// Other tests' Widgets (and their Deployments) count too.
	maxObjects := 2*max(countWidgets(t, east), countWidgets(t, west)) + 100
	registerMember(t, ns, "healthy", east)
	var replicas []*replica
	for _, id := range []string{"h1", "h2", "h3"} {
		replicas = append(replicas, startReplicaWith(t, ns, id, hubKubeconfig, "--member-max-objects", strconv.Itoa(maxObjects)))
	}
	settled(t, ns, 1, replicas, 2*time.Minute)
	baseline := map[string]int64{}
	for _, r := range replicas {
		baseline[r.id] = peakRSS(t, r)
	}
	alive := func(when string) {
		t.Helper()
		for _, r := range replicas {
			select {
			case <-r.Exited():
				t.Fatalf("%s: replica %s exited (%v)", when, r.id, r.Err())
			default:
			}
		}
	}
	// served creates a Widget in member and fails unless its Deployment
	// follows within 2 s.
	served := func(member *fleet.ControlPlane, name string) {
		t.Helper()
		w := &v1alpha1.Widget{}
		w.Namespace, w.Name, w.Spec.Replicas = ns, name, ptr.To[int32](1)
		if err := member.Client.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		took := waitFor(t, 10*time.Second, member.Name+"'s new Widget "+name+" reconciled", func(ctx context.Context) error {
			return member.Client.Get(ctx, client.ObjectKeyFromObject(w), &appsv1.Deployment{})
		})
		t.Logf("%s's new Widget %s reconciled in %s", member.Name, name, took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("%s's new Widget %s was reconciled after %s, want within 2s", member.Name, name, took)
		}
	}

	// Two hostile members: fronts before west that answer, in its place,
	// /version with a gzip bomb, and Widget watches with new objects forever.
	token, err := west.AdminToken(ctx, "widgethub-hostile")
	if err != nil {
		t.Fatal(err)
	}
	registered := time.Now()
	bomb := hostileRegistration(t, ns, "bomb", west, token, fleet.Fault{
		Answer: fleet.GzipBomb(`{"major":"1","gitVersion":"v1.`, 1<<30),
		Match:  func(r *http.Request) bool { return r.URL.Path == "/version" },
	})
	flood := hostileRegistration(t, ns, "flood", west, token, fleet.Fault{
		Answer: fleet.EndlessWatch(v1alpha1.GroupVersion.String(), "Widget", "flood"),
		Match:  func(r *http.Request) bool { return !fleet.NotWatch(r) && strings.HasSuffix(r.URL.Path, "/widgets") },
	})
	served(east, "during-attack")
	waitFor(t, time.Minute, "bomb reported ResponseTooLarge", func(ctx context.Context) error {
		return memberReason(ctx, ns, "bomb", v1alpha1.MemberResponseTooLargeReason)
	})
	t.Logf("bomb reported ResponseTooLarge by %s after registration", time.Since(registered).Round(time.Millisecond))
	waitFor(t, time.Minute, "flood reported TooManyObjects", func(ctx context.Context) error {
		return memberReason(ctx, ns, "flood", v1alpha1.MemberTooManyObjectsReason)
	})
	t.Logf("flood reported TooManyObjects (bound %d) by %s after registration", maxObjects, time.Since(registered).Round(time.Millisecond))
	// The hub keeps retrying them; the healthy member is served meanwhile.
	time.Sleep(10 * time.Second)
	served(east, "after-attack")
	alive("under attack")
	for _, f := range []*fleet.HTTPProxy{bomb, flood} {
		if _, faulted := f.Requests(); faulted == 0 {
			t.Fatal("a hostile front never answered in its member's place: the test proved nothing")
		}
	}
	_, bombs := bomb.Requests()
	_, floods := flood.Requests()
	t.Logf("the fronts answered %d gzip bombs and %d endless watches", bombs, floods)
	for _, r := range replicas {
		peak := peakRSS(t, r)
		t.Logf("replica %s: peak RSS %d MiB, %d MiB before the hostile members", r.id, peak>>20, baseline[r.id]>>20)
		if peak > baseline[r.id]+hostileRSSAllowance {
			t.Errorf("replica %s: peak RSS %d MiB, want within %d MiB of its %d MiB before the hostile members",
				r.id, peak>>20, hostileRSSAllowance>>20, baseline[r.id]>>20)
		}
	}

	// Removed, the hostile members leave a whole hub: a new member is engaged
	// within seconds and served.
	for _, name := range []string{"bomb", "flood"} {
		s := &corev1.Secret{}
		s.Namespace, s.Name = ns, name
		if err := testFleet.Hub.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "the hostile MemberClusters gone", func(ctx context.Context) error {
		for _, name := range []string{"bomb", "flood"} {
			err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1alpha1.MemberCluster{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("MemberCluster %s: %v", name, err)
			}
		}
		return nil
	})
	const engageWithin = 10 * time.Second
	registerMember(t, ns, "fresh", west)
	took := waitFor(t, time.Minute, "fresh engaged", func(ctx context.Context) error {
		return memberReason(ctx, ns, "fresh", v1alpha1.MemberEngagedReason)
	})
	t.Logf("a new member engaged %s after its registration", took.Round(time.Millisecond))
	if took > engageWithin {
		t.Errorf("a new member was engaged %s after its registration, want within %s", took, engageWithin)
	}
	served(east, "after-removal")
	served(west, "fresh")
	alive("after the hostile members were removed")

	// Every replica stops on SIGTERM within its grace period.
	stopped := time.Now()
	for _, r := range replicas {
		_ = r.Signal(syscall.SIGTERM)
	}
	for _, r := range replicas {
		select {
		case <-r.Exited():
			t.Logf("replica %s exited with %d %s after SIGTERM", r.id, r.ExitCode(), time.Since(stopped).Round(time.Millisecond))
			if code := r.ExitCode(); code != 0 {
				t.Errorf("replica %s exited with %d after SIGTERM, want 0", r.id, code)
			}
		case <-time.After(replicaGracePeriod - time.Since(stopped)):
			t.Errorf("replica %s still runs %s after SIGTERM (the chart's grace period)", r.id, replicaGracePeriod)
		}
	}
}

// hostileRegistration registers name in ns as a member whose server is a
// front before member that answers as fault says, with a bearer token (a
// client certificate cannot pass the front), and returns the front.
func hostileRegistration(t *testing.T, ns, name string, member *fleet.ControlPlane, token string, fault fleet.Fault) *fleet.HTTPProxy {
	t.Helper()
	front, err := fleet.NewHTTPProxy(member.Config.Host, member.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	front.Set(fault)
	kubeconfig, err := front.Kubeconfig(member.Kubeconfig, token)
	if err != nil {
		t.Fatal(err)
	}
	if err := testFleet.Hub.Client.Create(t.Context(), registration.NewSecret(ns, name, kubeconfig)); err != nil {
		t.Fatal(err)
	}
	return front
}

// peakRSS is the replica's peak resident set size (VmHWM), in bytes.
func peakRSS(t *testing.T, r *replica) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", r.Pid())
	return 0
}
