package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

// boundedMember builds a member of cp whose caches hold at most max objects.
func boundedMember(t *testing.T, cp *fleet.ControlPlane, max int) *clusters.Member {
	t.Helper()
	cfg, err := connect.RESTConfig(cp.Kubeconfig, connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member, err := clusters.New("bounded", cfg, clusters.MemberOptions{Scheme: clusters.NewScheme(), Logger: ctrl.Log, MaxObjects: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Stop)
	return member
}

func cachedWidgets(t *testing.T, m *clusters.Member) int {
	t.Helper()
	list := &v1alpha1.WidgetList{}
	if err := m.GetClient().List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// A member's caches hold at most MaxObjects: more at the start fails the
// sync, more arriving later stops the caches soon after the bound, and
// deleted objects leave the count, so that churn never adds up to it.
func TestMemberCachesStopPastTheirBound(t *testing.T) {
	cp := startMember(t)
	ctx := t.Context()
	const ns = "crowded"
	if err := fleet.CreateWidgets(ctx, cp.Client, ns, "first", 30, 4); err != nil {
		t.Fatal(err)
	}

	over := boundedMember(t, cp, 20)
	err := over.StartAndSync(ctx, 30*time.Second, &v1alpha1.Widget{})
	if !errors.Is(err, clusters.ErrTooManyObjects) {
		t.Fatalf("30 Widgets, a bound of 20: StartAndSync = %v, want ErrTooManyObjects", err)
	}
	t.Logf("refused: %v", err)

	// Churn: 30 deleted and 30 created stay under a bound of 50.
	const bound = 50
	member := boundedMember(t, cp, bound)
	if err := member.StartAndSync(ctx, 30*time.Second, &v1alpha1.Widget{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.DeleteAllOf(ctx, &v1alpha1.Widget{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return cachedWidgets(t, member) == 0 }, "the deletes reach the cache")
	if err := fleet.CreateWidgets(ctx, cp.Client, ns, "second", 30, 4); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return cachedWidgets(t, member) == 30 }, "the new Widgets reach the cache")
	if err := member.TooManyObjects(); err != nil {
		t.Fatalf("60 Widgets created, 30 of them deleted, a bound of %d: %v", bound, err)
	}

	// New Widgets without end: the caches stop soon after the bound.
	stopCreating := make(chan struct{})
	created := make(chan int)
	go func() {
		i := 0
		defer func() { created <- i }()
		for ; ; i++ {
			select {
			case <-stopCreating:
				return
			default:
			}
			w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("endless-%05d", i)}}
			if err := cp.Client.Create(ctx, w); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-member.Context().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the caches did not stop past their bound")
	}
	if err := member.TooManyObjects(); !errors.Is(err, clusters.ErrTooManyObjects) {
		t.Fatalf("TooManyObjects = %v, want ErrTooManyObjects", err)
	}
	// The caches hold what they had when they stopped, whatever comes after:
	// at most the object whose arrival passed the bound lands after the
	// stop, as its transform stops the caches and the cache stores it when
	// the transform returns.
	held := cachedWidgets(t, member)
	time.Sleep(2 * time.Second)
	close(stopCreating)
	n := <-created
	after := cachedWidgets(t, member)
	t.Logf("bound %d: the caches stopped holding %d Widgets, %d after 2s more; %d new Widgets created meanwhile", bound, held, after, n)
	if after > bound+1 || after-held > 1 {
		t.Fatalf("the caches hold %d Widgets (%d when they stopped), want at most %d and none after they stopped but the one that passed the bound", after, held, bound+1)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
