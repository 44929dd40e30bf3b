package members

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/reconcilers/controller/fairqueue"
)

// silentServer accepts connections and never answers; it returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()
	return l.Addr().String()
}

// An engagement whose worker is reclaimed returns at once, whether it waits
// on its member's checks or on its cache sync (whose bound is not the
// reconcile's), engages nothing, leaves no cache running and says why.
func TestReclaimedEngagementLeavesNothing(t *testing.T) {
	var holding atomic.Int64
	for name, server := range map[string]string{"checks": "https://" + silentServer(t), "sync": syncingServer(t, &holding)} {
		t.Run(name, func(t *testing.T) {
			p := New(Options{Scheme: clusters.NewScheme(), ProbeTimeout: 10 * time.Second, SyncTimeout: 10 * time.Second,
				WatchedObjects: []client.Object{&v1alpha1.Widget{}}})
			p.ownership = everything{}
			runCtx, stop := context.WithCancel(context.Background())
			defer stop()
			p.env.runCtx = runCtx
			m := newMember("silent", p.env, logr.Discard())
			cfg := &connect.Config{REST: &rest.Config{Host: server, BearerToken: "t",
				TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, RequestTimeout: time.Minute}

			// Reclaimed after a second, and for the sync once it holds a
			// request at the member (within 8 s).
			ctx, reclaim := context.WithCancelCause(context.Background())
			var heldAtReclaim atomic.Int64
			var reclaimedAt atomic.Pointer[time.Time]
			go func() {
				time.Sleep(time.Second)
				for deadline := time.Now().Add(7 * time.Second); name == "sync" && holding.Load() == 0 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				heldAtReclaim.Store(holding.Load())
				now := time.Now()
				reclaimedAt.Store(&now)
				reclaim(fairqueue.ErrWorkerReclaimed)
			}()
			obs := m.engage(ctx, engagement{cfg: cfg})
			returned := time.Now()

			t.Logf("returned: %v", obs.err)
			if reclaimedAt.Load() == nil {
				t.Fatalf("the engagement returned before its worker was reclaimed: %v", obs.err)
			}
			if name == "sync" && heldAtReclaim.Load() == 0 {
				t.Error("the cache's sync did not reach the member within 8 s: the test shows nothing of the sync")
			}
			if after := returned.Sub(*reclaimedAt.Load()); after > 2*time.Second {
				t.Errorf("the engagement returned %s after its worker was reclaimed (checks and sync bounded by 10s)", after)
			}
			if !errors.Is(obs.err, fairqueue.ErrWorkerReclaimed) || obs.ready {
				t.Errorf("engage = ready %v, error %v; want not ready, ErrWorkerReclaimed", obs.ready, obs.err)
			}
			if state, conn, _ := m.current(); state != idle || conn != nil {
				t.Errorf("a reclaimed engagement left the member %s", state)
			}
			deadline := time.Now().Add(time.Second)
			for holding.Load() > 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := holding.Load(); n > 0 {
				t.Errorf("the member's cache still has %d requests open a second after the engagement returned", n)
			}
		})
	}
}

// A reconcile whose worker was reclaimed fails, whatever it returned, so
// that it is retried; others keep their outcome.
func TestReclaimedReconcileFails(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	if res, err := reclaimed(ctx, reconcile.Result{RequeueAfter: time.Second}, nil); err != nil || res.RequeueAfter != time.Second {
		t.Errorf("not reclaimed: got %v, %v", res, err)
	}
	cancel(fairqueue.ErrWorkerReclaimed)
	for _, in := range []error{nil, errors.New("probe failed")} {
		if _, err := reclaimed(ctx, reconcile.Result{RequeueAfter: time.Second}, in); !errors.Is(err, fairqueue.ErrWorkerReclaimed) {
			t.Errorf("reclaimed with %v: got %v, want ErrWorkerReclaimed", in, err)
		}
	}
}

// The queue of registrations hands back the requests it was given, each
// registration its own member, and delays them by the controller's limiter.
func TestRegistrationQueue(t *testing.T) {
	w := &registrationWorkers{workers: 2}
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Hour, time.Hour)
	q := w.newQueue("registrations", rl)
	defer q.ShutDown()
	a := reconcile.Request{}
	a.Namespace, a.Name = "ns", "a"
	b := a
	b.Name = "b"
	q.Add(a)
	q.Add(b)
	q.AddRateLimited(a) // already queued
	if got := q.NumRequeues(a); got != 1 {
		t.Errorf("NumRequeues = %d, want 1", got)
	}
	first, _ := q.Get()
	second, _ := q.Get()
	if first != a || second != b {
		t.Errorf("Get gave %v then %v, want %v then %v", first, second, a, b)
	}
	if r, f := w.queue.Load().MemberLen(multicluster.ClusterName("ns/a")); r != 0 || f != 1 {
		t.Errorf("member ns/a: %d ready, %d in flight; want 0, 1", r, f)
	}
	q.Done(first)
	q.Done(second)
	q.Forget(a)
	if got := q.NumRequeues(a); got != 0 {
		t.Errorf("NumRequeues after Forget = %d", got)
	}
}

// syncingServer answers a member's checks (version, readiness, discovery
// of the Widget API, a list of one Widget) and holds every other request,
// the cache's list among them, until the client gives up; holding counts
// those it holds.
func syncingServer(t *testing.T, holding *atomic.Int64) string {
	t.Helper()
	answers := map[string]string{
		"/version": `{"major":"1","minor":"31","gitVersion":"v1.31.0"}`,
		"/readyz":  `ok`,
		"/api":     `{"kind":"APIVersions","versions":["v1"]}`,
		"/apis": `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"widgethub.io",` +
			`"versions":[{"groupVersion":"widgethub.io/v1alpha1","version":"v1alpha1"}],` +
			`"preferredVersion":{"groupVersion":"widgethub.io/v1alpha1","version":"v1alpha1"}}]}`,
		"/apis/widgethub.io/v1alpha1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"widgethub.io/v1alpha1",` +
			`"resources":[{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["get","list","watch"]}]}`,
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, ok := answers[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
			return
		}
		if r.URL.Path == "/apis/widgethub.io/v1alpha1/widgets" && r.URL.Query().Get("limit") == "1" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"WidgetList","apiVersion":"widgethub.io/v1alpha1","metadata":{},"items":[]}`))
			return
		}
		holding.Add(1)
		defer holding.Add(-1)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
