//go:build scenarios

package main_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// The registrations of a test share two member API servers and their
// Widgets: once one registration has written a change, the others of its
// member find nothing left to write, so a Widget reconciled says nothing of
// which registrations are served. takeoverNamespace holds, in every member,
// a Widget whose Deployment the member refuses (fleet.RefuseDeployments):
// every registration that is served keeps trying to write it, with its own
// user, whatever the others do. The members' audit logs then tell, per
// registration, which replica reconciles it.
const takeoverNamespace = "takeover"

// refuseTakeoverWidget puts that Widget in every member until the test ends.
func refuseTakeoverWidget(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	for _, m := range testFleet.Members {
		lift, err := m.RefuseDeployments(ctx, takeoverNamespace)
		if err != nil {
			t.Fatal(err)
		}
		w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: takeoverNamespace, Name: "refused"}}
		if err := m.Client.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { // the Widget first, so that no Deployment is written once the policy goes
			ctx := context.Background()
			if err := m.Client.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
			if err := lift(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}

// writesByUser reads the writes of replicas from every member's audit log,
// by user, in the order the API servers received them.
func writesByUser(t *testing.T) map[string][]fleet.Write {
	t.Helper()
	byUser := map[string][]fleet.Write{}
	for _, m := range testFleet.Members {
		writes, err := m.Writes()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range writes {
			if _, ok := writer(w); ok {
				byUser[w.User] = append(byUser[w.User], w)
			}
		}
	}
	for _, writes := range byUser {
		slices.SortFunc(writes, func(a, b fleet.Write) int { return a.Received.Compare(b.Received) })
	}
	return byUser
}

// writer is the replica that made w, from its user agent widgethub/<id>.
func writer(w fleet.Write) (string, bool) {
	rest, ok := strings.CutPrefix(w.UserAgent, "widgethub/")
	replica, _, _ := strings.Cut(rest, " ")
	return replica, ok
}

// waitWrittenByOwners waits until every one of regs has been written to
// since since, with its own user, by the replica that serves it now
// (MemberCluster status.servedBy), and returns, per registration, how long
// after since the first such write came. It polls the audit logs once a
// second: they are read whole.
func waitWrittenByOwners(t *testing.T, namespace string, regs []string, users map[string]string, since time.Time) map[string]time.Duration {
	t.Helper()
	first := map[string]time.Duration{}
	deadline := time.Now().Add(time.Minute)
	for {
		served, err := servedBy(t.Context(), namespace)
		if err != nil {
			t.Fatal(err)
		}
		byUser := writesByUser(t)
		var missing []string
		for _, reg := range regs {
			owner := served[reg]
			i := slices.IndexFunc(byUser[users[reg]], func(w fleet.Write) bool {
				r, _ := writer(w)
				return r == owner && w.Received.After(since)
			})
			if owner == "" || i < 0 {
				missing = append(missing, fmt.Sprintf("%s (served by %q)", reg, owner))
				continue
			}
			first[reg] = byUser[users[reg]][i].Received.Sub(since)
		}
		if len(missing) == 0 {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d registrations not written to by the replica serving them, with their own user, within a minute: %s",
				len(missing), len(regs), strings.Join(missing, ", "))
		}
		time.Sleep(time.Second)
	}
}

// spread is the least and the greatest of d's values.
func spread(d map[string]time.Duration) (least, greatest time.Duration) {
	values := slices.Sorted(maps.Values(d))
	if len(values) == 0 {
		return 0, 0
	}
	return values[0], values[len(values)-1]
}
