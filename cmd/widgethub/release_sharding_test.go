//go:build scenarios

package main_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/internal/fleet"
)

// A replica that hands a member over and fails to release its fence tries
// again: the new owner cannot take a fence a live replica holds, and nothing
// else wakes the registration on the replica that holds it.
func TestFailedFenceReleaseIsRetried(t *testing.T) {
	ns := hubNamespace(t, "release")
	const registrations = 12
	register(t, ns, registrations)

	// Replica a reaches the hub through a front that, once armed, fails
	// the first releases of each member's fence (a write that clears its
	// holder) with a 500: more than one, so that a reconcile that happens
	// to come again without a retry (a member moved twice while c joins)
	// does not hide a release that is never tried again.
	var armed atomic.Bool
	const failures = 3
	var mu sync.Mutex
	failed := map[string]int{}
	fences := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/widgethub-member-"
	front, err := fleet.NewFront(testFleet.Hub, func(w http.ResponseWriter, r *http.Request) bool {
		member, fence := strings.CutPrefix(r.URL.Path, fences)
		if !fence || r.Method != http.MethodPut || !armed.Load() {
			return false
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if lease, ok := obj.(*coordinationv1.Lease); err != nil || !ok || ptr.Deref(lease.Spec.HolderIdentity, "-") != "" {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if failed[member] == failures {
			return false
		}
		failed[member]++
		fleet.WriteStatus(w, http.StatusInternalServerError, 0, "injected: the fence write fails once")
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	token, err := testFleet.Hub.AdminToken(t.Context(), "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	fleet.HandOver(token)
	kubeconfig, err := front.Kubeconfig(testFleet.Hub.Kubeconfig, token)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hub-via-front.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	a, b := startReplicaWith(t, ns, "a", path), startReplica(t, ns, "b")
	before := settled(t, ns, registrations, []*replica{a, b}, 2*time.Minute)

	// A third replica takes a third of the members, two of them from a.
	armed.Store(true)
	c := startReplica(t, ns, "c")
	after := settled(t, ns, registrations, []*replica{a, b, c}, 30*time.Second)
	var moved []string
	for reg, r := range after {
		if before[reg] == a.id && r != a.id {
			moved = append(moved, reg)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, reg := range moved {
		if failed[reg] != failures {
			t.Errorf("registration %s moved from a to %s, but a's release of its fence failed %d times, not %d: the test did not exercise the retry", reg, after[reg], failed[reg], failures)
		}
	}
	if len(moved) == 0 {
		t.Errorf("no member moved from a (before %v, after %v): the test did not exercise a hand-over", before, after)
	}
	t.Logf("%d members handed over by a, each after %d failed releases of its fence", len(moved), failures)
}
