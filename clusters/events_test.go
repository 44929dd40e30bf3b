package clusters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

// A member's recorders send at most its Event budget to its API server; the
// rest are dropped and counted, and exactly the Events not counted arrive.
func TestMemberEventsStayWithinTheBudget(t *testing.T) {
	const name, ns, sent = "event-budget", "event-budget", 3 * clusters.EventBurst / 2
	alpha := startMember(t)
	if err := fleet.EnsureNamespace(context.Background(), alpha.Client, ns); err != nil {
		t.Fatal(err)
	}
	cfg, err := connect.RESTConfig(alpha.Kubeconfig, connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member, err := clusters.New(name, cfg, clusters.MemberOptions{Scheme: clusters.NewScheme(), Logger: ctrl.Log.WithName(name)})
	if err != nil {
		t.Fatal(err)
	}
	if err := member.StartAndSync(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Stop)
	t.Cleanup(func() { clusters.ForgetMetrics(name) })

	recorder := member.GetEventRecorder(name)
	start := time.Now()
	for i := range sent {
		regarding := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("cm-%03d", i), UID: types.UID(fmt.Sprint("uid-", i)),
		}}
		recorder.Eventf(regarding, nil, corev1.EventTypeNormal, "Budget", "Test", "event %d", i)
	}
	refilled := int(time.Since(start).Seconds()*clusters.EventsPerSecond) + 1
	dropped := int(testutil.ToFloat64(clusters.MemberEventsDropped.WithLabelValues(name)))
	kept := sent - dropped
	if kept < clusters.EventBurst || kept > clusters.EventBurst+refilled {
		t.Fatalf("%d of %d Events kept, want the burst of %d plus at most %d refilled", kept, sent, clusters.EventBurst, refilled)
	}
	g := NewWithT(t)
	events := func() (int, error) {
		list := &eventsv1.EventList{}
		err := alpha.Client.List(context.Background(), list, client.InNamespace(ns))
		return len(list.Items), err
	}
	g.Eventually(events, 30*time.Second, 100*time.Millisecond).Should(Equal(kept), "Events in the member's API server")

	// A marker, recorded once the budget has refilled for it: once it has
	// arrived, the recorder has had its chance to send anything recorded
	// before it. Exactly the kept Events and the marker arrive, and no
	// late one after them.
	time.Sleep(2 * time.Second / clusters.EventsPerSecond)
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marker", UID: "uid-marker"}}
	recorder.Eventf(marker, nil, corev1.EventTypeNormal, "Budget", "Test", "marker")
	if now := int(testutil.ToFloat64(clusters.MemberEventsDropped.WithLabelValues(name))); now != dropped {
		t.Fatalf("the marker Event was dropped (%d dropped, %d before): the budget did not refill", now, dropped)
	}
	g.Eventually(events, 30*time.Second, 100*time.Millisecond).Should(Equal(kept+1), "Events in the member's API server with the marker")
	g.Consistently(events, 3*time.Second, 100*time.Millisecond).Should(Equal(kept+1), "Events arriving late")
}

// startMember starts a real API server (kube-apiserver and etcd) for the
// test and stops it when the test ends. Only the tests that need a member
// start one, so the fuzz targets' workers start none.
func startMember(t *testing.T) *fleet.ControlPlane {
	t.Helper()
	f, err := fleet.Start(fleet.Options{Members: []string{"member"}, Scheme: clusters.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	return f.Member("member")
}
