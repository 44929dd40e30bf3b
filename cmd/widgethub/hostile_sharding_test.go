//go:build scenarios

package main_test

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// What the test allows a replica's peak RSS to grow by over its own
// baseline (measured once it serves the healthy member), while hostile
// members answer a 1 GiB gzip bomb, an endless /version, a 1 MiB version
// and an endless watch: without the bounds
// either alone takes a manager past the chart's 512 MiB limit.
const hostileRSSAllowance = 150 << 20

// The chart's terminationGracePeriodSeconds: a replica told to stop must
// have handed its members over and exited within it.
const replicaGracePeriod = 40 * time.Second

// A sharded hub of 3 replicas given four hostile registrations, whose
// servers answer /version with a gzip bomb, an endless body or a 1 MiB
// version full of escape sequences, or stream new objects without end in
// their Widget watches: each is reported with its reason, no
// replica exits, each replica's peak RSS stays within a stated allowance,
// and a healthy member is served meanwhile. Once they are deleted the hub is
// whole: a new member is engaged within seconds, and every replica stops on
// SIGTERM within its grace period.
func TestShardedHubSurvivesAHostileMemberAndRecovers(t *testing.T) {
	ctx := t.Context()
	ns := hubNamespace(t, "hostile")
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
	isVersion := func(r *http.Request) bool { return r.URL.Path == "/version" }
	hostile := []struct {
		name   string
		fault  fleet.Fault
		reason string
	}{
		{"bomb", fleet.Fault{Answer: fleet.GzipBomb(`{"major":"1","gitVersion":"v1.`, 1<<30), Match: isVersion}, v1alpha1.MemberResponseTooLargeReason},
		{"endless-body", fleet.Fault{Answer: fleet.EndlessBody(`{"major":"1","gitVersion":"v1.`), Match: isVersion}, v1alpha1.MemberResponseTooLargeReason},
		{"version-1mib", fleet.Fault{Answer: versionAnswer("v1.36.3" + strings.Repeat("\x1b[2J\x1b]0;owned\x07", 1<<20/14)), Match: isVersion}, v1alpha1.MemberResponseTooLargeReason},
		{"endless-list", fleet.Fault{
			Answer: fleet.EndlessList(v1alpha1.GroupVersion.String(), "Widget", "endless"),
			Match:  func(r *http.Request) bool { return fleet.NotWatch(r) && strings.HasSuffix(r.URL.Path, "/widgets") },
		}, v1alpha1.MemberResponseTooLargeReason},
		{"flood", fleet.Fault{
			Answer: fleet.EndlessWatch(v1alpha1.GroupVersion.String(), "Widget", "flood"),
			Match:  func(r *http.Request) bool { return !fleet.NotWatch(r) && strings.HasSuffix(r.URL.Path, "/widgets") },
		}, v1alpha1.MemberTooManyObjectsReason},
	}
	fronts := make([]*fleet.HTTPProxy, len(hostile))
	for i, h := range hostile {
		fronts[i] = hostileRegistration(t, ns, h.name, west, token, h.fault)
	}
	served(east, "during-attack")
	for _, h := range hostile {
		waitFor(t, time.Minute, h.name+" reported "+h.reason, func(ctx context.Context) error {
			return memberReason(ctx, ns, h.name, h.reason)
		})
		t.Logf("%s reported %s by %s after registration (object bound %d)", h.name, h.reason, time.Since(registered).Round(time.Millisecond), maxObjects)
	}
	// The hub keeps retrying them; the healthy member is served meanwhile.
	time.Sleep(10 * time.Second)
	served(east, "after-attack")
	alive("under attack")
	for i, f := range fronts {
		_, faulted := f.Requests()
		if faulted == 0 {
			t.Fatalf("the front of %s never answered in its member's place: the test proved nothing", hostile[i].name)
		}
		t.Logf("the front of %s answered %d requests in its member's place", hostile[i].name, faulted)
	}
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
	for _, h := range hostile {
		s := &corev1.Secret{}
		s.Namespace, s.Name = ns, h.name
		if err := testFleet.Hub.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "the hostile MemberClusters gone", func(ctx context.Context) error {
		for _, h := range hostile {
			err := testFleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: h.name}, &v1alpha1.MemberCluster{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("MemberCluster %s: %v", h.name, err)
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

// versionAnswer answers /version with gitVersion, as JSON.
func versionAnswer(gitVersion string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Info{Major: "1", Minor: "36", GitVersion: gitVersion})
	})
}
