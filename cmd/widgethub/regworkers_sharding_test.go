//go:build scenarios

package main_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/providers/sharding"
)

// A killed replica's members are served again by the other within the
// lease duration plus 5s while 40 registrations hang in their cache sync
// (each would hold a worker for the 30s sync timeout), 20 of them on each
// replica before the kill and all 40 on the survivor after.
func TestDeadReplicasMembersTakenOverWhileRegistrationsHang(t *testing.T) {
	ns := hubNamespace(t, "regworkers")
	const healthy, hanging = 12, 40
	register(t, ns, healthy)

	east := testFleet.Members[0]
	front, err := fleet.NewHTTPProxy(east.Config.Host, east.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	// The member's checks pass (version, readiness, discovery, a list of
	// one object); its cache's lists and watches are held.
	front.Set(fleet.Fault{BlackHole: true, Match: func(r *http.Request) bool {
		return strings.HasPrefix(r.URL.Path, "/apis/") && strings.Count(r.URL.Path, "/") >= 4 && r.URL.Query().Get("limit") != "1"
	}})
	token, err := east.AdminToken(t.Context(), "widgethub-hanging")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := front.Kubeconfig(east.Kubeconfig, token)
	if err != nil {
		t.Fatal(err)
	}
	for i := range hanging {
		if err := testFleet.Hub.Client.Create(t.Context(), registration.NewSecret(ns, fmt.Sprintf("hang-%02d", i), kc)); err != nil {
			t.Fatal(err)
		}
	}

	replicas := []*replica{startReplica(t, ns, "r1"), startReplica(t, ns, "r2")}
	var before map[string]string
	waitFor(t, 3*time.Minute, "every healthy registration served, registrations hanging on both replicas", func(ctx context.Context) error {
		var err error
		if before, err = servedBy(ctx, ns); err != nil {
			return err
		}
		n := 0
		for reg := range before {
			if strings.HasPrefix(reg, "reg-") {
				n++
			}
		}
		if n != healthy {
			return fmt.Errorf("%d of %d healthy registrations served", n, healthy)
		}
		if held := len(front.Held()); held < 16 {
			return fmt.Errorf("the front holds %d requests", held)
		}
		return nil
	})
	killed := replicas[0]
	victims := servedByReplica(before, killed.id)
	if len(victims) == 0 {
		t.Fatalf("r1 serves none of the healthy members: %v", before)
	}
	_ = killed.Signal(syscall.SIGKILL)
	<-killed.Exited()
	takeover := waitServedElsewhere(t, ns, victims, killed.id, "r1's healthy members served by r2")
	t.Logf("SIGKILL: %d healthy members of r1 served again %s after the kill, while %d registrations hang (the front holds %d requests)",
		len(victims), takeover.Round(100*time.Millisecond), hanging, len(front.Held()))
	if limit := sharding.DefaultLeaseDuration + 5*time.Second; takeover > limit {
		t.Errorf("r1's members were served again %s after the kill, want within the lease duration + 5s (%s)", takeover.Round(100*time.Millisecond), limit)
	}
}
