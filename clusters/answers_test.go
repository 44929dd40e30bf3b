package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

// hostileMember is a real member API server behind a TLS front that answers
// what the test tells it to in the member's place, and a Member of the hub
// that reaches it through the front with a bearer token.
type hostileMember struct {
	cp     *fleet.ControlPlane
	front  *fleet.HTTPProxy
	member *clusters.Member
	token  string
}

// responseLimit is the bound of the hostile member's answers in these tests
// (ConfigOptions.MaxResponseBytes): smaller than the default, so that the
// tests read little.
const responseLimit = 8 << 20

func startHostileMember(t *testing.T) *hostileMember {
	t.Helper()
	cp := startMember(t)
	token, err := cp.AdminToken(context.Background(), "hostile")
	if err != nil {
		t.Fatal(err)
	}
	front, err := fleet.NewHTTPProxy(cp.Config.Host, cp.Config.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	kubeconfig, err := front.Kubeconfig(cp.Kubeconfig, token)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := connect.RESTConfig(kubeconfig, connect.ConfigOptions{MaxResponseBytes: responseLimit, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	member, err := clusters.New("hostile", cfg, clusters.MemberOptions{Scheme: clusters.NewScheme(), Logger: ctrl.Log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Stop)
	return &hostileMember{cp: cp, front: front, member: member, token: token}
}

// answer makes the front answer the requests to path (and, with watch, only
// the watches of it) with h until the subtest ends.
func (h *hostileMember) answer(t *testing.T, path string, watch bool, answer http.Handler) {
	t.Helper()
	h.front.Set(fleet.Fault{Answer: answer, Match: func(r *http.Request) bool {
		return r.URL.Path == path && !fleet.NotWatch(r) == watch
	}})
	t.Cleanup(h.front.Clear)
}

// allocated is how many bytes the whole process allocated while f ran (the
// front's share included): an upper bound of its heap growth, however
// briefly it held what it allocated.
func allocated(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const widgetsPath = "/apis/widgethub.io/v1alpha1/namespaces/default/widgets"

const deploymentsPath = "/apis/apps/v1/namespaces/default/deployments"

// Each hostile answer fails its request with ErrResponseTooLarge after the
// bound, and the process allocates a bounded amount meanwhile: a gzip bomb
// decompressing to 256 MiB and an endless body answering /version (bound
// MaxVersionBytes, 4 KiB), and a list whose items never end (bound 8 MiB
// here).
func TestHostileAnswersAreBounded(t *testing.T) {
	h := startHostileMember(t)
	ctx := context.Background()
	const bomb = 256 << 20
	for _, tc := range []struct {
		name   string
		path   string
		answer http.Handler
		do     func() error
		// maxAlloc bounds what the process allocates meanwhile.
		maxAlloc uint64
	}{
		{name: "version gzip bomb", path: "/version", answer: fleet.GzipBomb(`{"major":"1","gitVersion":"v1.`, bomb),
			do: func() error { _, err := h.member.Version(ctx); return err }, maxAlloc: 8 << 20},
		{name: "version endless body", path: "/version", answer: fleet.EndlessBody(`{"major":"1","gitVersion":"v1.\u001b[31m`),
			do: func() error { _, err := h.member.Version(ctx); return err }, maxAlloc: 8 << 20},
		{name: "endless Widget list", path: widgetsPath, answer: fleet.EndlessList("widgethub.io/v1alpha1", "Widget", "default"),
			do: func() error {
				return h.member.GetAPIReader().List(ctx, &v1alpha1.WidgetList{}, client.InNamespace("default"))
			}, maxAlloc: 6*responseLimit + 8<<20},
		{name: "paged Widget list, each page within the bound, not all", path: widgetsPath,
			answer: fleet.PagedList("widgethub.io/v1alpha1", "Widget", "default", 1<<20, 2*responseLimit>>20),
			do: func() error {
				_, err := pagedList(ctx, h.member)
				return err
			}, maxAlloc: 12*responseLimit + 8<<20}, // each page is decoded: 36-60 MiB
		// Each empty item decodes to a whole object: 4 MiB of them were 1.4
		// million Widgets (456 MiB) or Deployments (1.9 GiB). The probe's
		// list asks for one.
		{name: "one-object Widget list of 4 MiB of empty items", path: widgetsPath,
			answer: fleet.EmptyItems("widgethub.io/v1alpha1", "Widget", 4<<20, false),
			do: func() error {
				return h.member.GetAPIReader().List(ctx, &v1alpha1.WidgetList{}, client.InNamespace("default"), client.Limit(1))
			}, maxAlloc: 32 << 20},
		{name: "one-object Deployment list of 4 MiB of empty protobuf items", path: deploymentsPath,
			answer: fleet.EmptyItems("apps/v1", "Deployment", 4<<20, true),
			do: func() error {
				return h.member.GetAPIReader().List(ctx, &appsv1.DeploymentList{}, client.InNamespace("default"), client.Limit(1))
			}, maxAlloc: 32 << 20},
		{name: "Widget list gzip bomb", path: widgetsPath, answer: fleet.GzipBomb(`{"kind":"WidgetList","items":[`, bomb),
			do: func() error {
				return h.member.GetAPIReader().List(ctx, &v1alpha1.WidgetList{}, client.InNamespace("default"))
			}, maxAlloc: 6*responseLimit + 8<<20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.answer(t, tc.path, false, tc.answer)
			var err error
			start := time.Now()
			n := allocated(func() { err = tc.do() })
			t.Logf("failed after %s, %.1f MiB allocated (bound %.0f MiB): %v", time.Since(start).Round(time.Millisecond), float64(n)/(1<<20), float64(tc.maxAlloc)/(1<<20), err)
			if !errors.Is(err, connect.ErrResponseTooLarge) {
				t.Fatalf("err = %v, want ErrResponseTooLarge", err)
			}
			if n > tc.maxAlloc {
				t.Fatalf("the process allocated %d bytes, more than the %d allowed", n, tc.maxAlloc)
			}
		})
	}

	// Under net/http's own bound of 10 MiB, over connect's: refused.
	t.Run("headers past the bound", func(t *testing.T) {
		junk := strings.Repeat("x", 8<<20)
		h.answer(t, "/version", false, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Junk", junk)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"major":"1","gitVersion":"v1.36.3"}`)
		}))
		// Over HTTP/2, as here, a header list past the bound fails the
		// connection (COMPRESSION_ERROR); over HTTP/1.1 the request.
		v, err := h.member.Version(ctx)
		if err == nil {
			t.Fatalf("Version with 8 MiB of headers = %q, want an error", v)
		}
		t.Logf("refused: %v", err)
	})

	// A paged list within the bound in all is read whole; each list counts
	// its own pages.
	t.Run("paged list within the bound in all", func(t *testing.T) {
		h.answer(t, widgetsPath, false, fleet.PagedList("widgethub.io/v1alpha1", "Widget", "default", 1<<20, responseLimit>>20/2))
		for range 3 {
			if n, err := pagedList(ctx, h.member); err != nil || n == 0 {
				t.Fatalf("paged list of %d MiB: %d Widgets, %v; want them all", responseLimit>>20/2, n, err)
			}
		}
	})

	t.Run("version within the bound is cut", func(t *testing.T) {
		long := "v1.36.3-" + strings.Repeat("a", 2000)
		h.answer(t, "/version", false, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"major":"1","gitVersion":%q}`, long)
		}))
		v, err := h.member.Version(ctx)
		if err != nil || v != long[:clusters.MaxVersionLength] {
			t.Fatalf("Version = %q, %v; want the first %d bytes of the member's", v, err, clusters.MaxVersionLength)
		}
	})

	t.Run("the next probe reports a refused answer", func(t *testing.T) {
		h.answer(t, widgetsPath, false, fleet.EndlessBody(`{"items":[`))
		if err := h.member.GetAPIReader().List(ctx, &v1alpha1.WidgetList{}, client.InNamespace("default")); !errors.Is(err, connect.ErrResponseTooLarge) {
			t.Fatalf("list: %v, want ErrResponseTooLarge", err)
		}
		h.front.Clear()
		if _, err := h.member.Preflight(ctx, 10*time.Second, &v1alpha1.Widget{}); !errors.Is(err, connect.ErrResponseTooLarge) {
			t.Fatalf("first probe after the refusal: %v, want ErrResponseTooLarge", err)
		}
		if _, err := h.member.Preflight(ctx, 10*time.Second, &v1alpha1.Widget{}); err != nil {
			t.Fatalf("second probe: %v, want none: the refusal was reported", err)
		}
	})

	t.Run("one endless watch event", func(t *testing.T) {
		h.answer(t, widgetsPath, true, fleet.EndlessBody(`{"type":"ADDED","object":{"kind":"Widget","metadata":{"name":"`))
		var err error
		n := allocated(func() { err = watchToEnd(ctx, h.member) })
		t.Logf("%.1f MiB allocated: %v", float64(n)/(1<<20), err)
		if !errors.Is(err, connect.ErrResponseTooLarge) {
			t.Fatalf("watch: %v, want ErrResponseTooLarge", err)
		}
		if max := uint64(4*connect.MaxEventBytes + 8<<20); n > max {
			t.Fatalf("the process allocated %d bytes, more than the %d allowed", n, max)
		}
	})
}

// pagedList lists the default namespace's Widgets in pages of 500 through
// the member's API reader, as the reflector does when a member refuses a
// streaming watch-list: client-go's pager, which holds every page until the
// last. It returns how many Widgets it read.
func pagedList(ctx context.Context, member *clusters.Member) (int, error) {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		list := &v1alpha1.WidgetList{}
		err := member.GetAPIReader().List(ctx, list, client.InNamespace("default"), client.Limit(opts.Limit), client.Continue(opts.Continue))
		return list, err
	})
	list, _, err := p.ListWithAlloc(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return meta.LenList(list), nil
}

// watchToEnd watches the default namespace's Widgets through the member's
// HTTP client and reads the stream until it fails.
func watchToEnd(ctx context.Context, member *clusters.Member) error {
	cfg := rest.CopyConfig(member.GetConfig())
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientForConfigAndClient(cfg, member.GetHTTPClient())
	if err != nil {
		return err
	}
	body, err := rc.Get().AbsPath(widgetsPath).Param("watch", "true").Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(io.Discard, body)
	return err
}

// A member's cache whose Widget watches send an event that never ends: the
// watch-list of the initial fill (client-go's WatchListClient is on by
// default) fails and the reflector falls back to a list, which the front lets
// through, so the cache syncs; every watch after it fails, and the next
// probe says why.
func TestEndlessWatchEventFailsTheProbe(t *testing.T) {
	h := startHostileMember(t)
	var watchLists atomic.Int64
	h.front.Set(fleet.Fault{Answer: fleet.EndlessBody(`{"type":"ADDED","object":{"kind":"Widget","metadata":{"name":"`),
		Match: func(r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/widgets") || fleet.NotWatch(r) {
				return false
			}
			if r.URL.Query().Get("sendInitialEvents") == "true" {
				watchLists.Add(1)
			}
			return true
		}})
	ctx := context.Background()
	if err := h.member.StartAndSync(ctx, 10*time.Second, &v1alpha1.Widget{}); err != nil {
		t.Fatalf("StartAndSync: %v", err)
	}
	// The sync waited for the watch-list to fail and the list after it.
	if watchLists.Load() == 0 {
		t.Error("the cache synced without its watch-list (sendInitialEvents=true) reaching the member")
	}
	NewWithT(t).Eventually(func() error {
		_, err := h.member.Preflight(ctx, 10*time.Second, &v1alpha1.Widget{})
		return err
	}, 10*time.Second, 100*time.Millisecond).Should(MatchError(connect.ErrResponseTooLarge))
}

// A member's cache whose Widgets' streaming watch-list fails, and whose
// paged list never ends, each page within the bound with a continue token
// for the next: the reflector's pager would hold page after page until the
// sync times out; the pages together fail at the bound, and the sync's
// error says why (the engagement reports it as ResponseTooLarge).
func TestEndlessPagedListFailsTheSync(t *testing.T) {
	h := startHostileMember(t)
	var pages atomic.Int64
	endless := fleet.PagedList("widgethub.io/v1alpha1", "Widget", "", 1<<20, 0)
	h.front.Set(fleet.Fault{Match: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/widgets") },
		Answer: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !fleet.NotWatch(r) {
				http.Error(w, "no watch here", http.StatusInternalServerError)
				return
			}
			pages.Add(1)
			endless.ServeHTTP(w, r)
		})})
	var err error
	n := allocated(func() { err = h.member.StartAndSync(context.Background(), 10*time.Second, &v1alpha1.Widget{}) })
	t.Logf("%d pages asked for, %.1f MiB allocated: %v", pages.Load(), float64(n)/(1<<20), err)
	if !errors.Is(err, connect.ErrResponseTooLarge) {
		t.Fatalf("StartAndSync: %v; want ErrResponseTooLarge", err)
	}
	// Each list stops at the bound, and the reflector lists again after a
	// back-off: a few lists in the ten seconds.
	if max := uint64(40 * responseLimit); n > max {
		t.Fatalf("the process allocated %d bytes in the sync, more than the %d allowed", n, max)
	}
}

// A member that answers with a redirect, to a plain-HTTP or an HTTPS host
// the hub trusts as it trusts the member, gets an error that names the
// status and not the Location; the other host receives nothing, and a
// TokenRequest (the renewal's POST) reaches the front once, never replayed.
func TestRedirectsAreRefused(t *testing.T) {
	h := startHostileMember(t)
	ctx := context.Background()
	for _, scheme := range []string{"http", "https"} {
		for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			t.Run(fmt.Sprintf("%d to %s", code, scheme), func(t *testing.T) {
				var rec *fleet.Recorder
				if scheme == "https" {
					rec = fleet.NewRecorder(h.front.Certificate())
				} else {
					rec = fleet.NewRecorder(nil)
				}
				defer rec.Close()
				// The Location must not reach the error (its path stands for
				// what a thief would put there).
				location := rec.URL() + "/l0cation-secret"
				h.front.Set(fleet.Fault{Answer: fleet.Redirect(code, location)})
				defer h.front.Clear()

				_, before := h.front.Requests()
				checks := map[string]error{}
				_, checks["version"] = h.member.Version(ctx)
				checks["list"] = h.member.GetAPIReader().List(ctx, &v1alpha1.WidgetList{}, client.InNamespace("default"))
				_, _, checks["token request"] = h.member.RenewToken(ctx, connect.TokenClaims{Namespace: "default", ServiceAccount: "hostile",
					IssuedAt: time.Now(), Expiry: time.Now().Add(time.Hour)}, time.Hour)
				for what, err := range checks {
					if !errors.Is(err, connect.ErrRedirectRefused) {
						t.Errorf("%s: %v, want ErrRedirectRefused", what, err)
					} else if strings.Contains(err.Error(), "l0cation-secret") || strings.Contains(err.Error(), rec.URL()) {
						t.Errorf("%s: the error names the Location: %v", what, err)
					}
				}
				_, after := h.front.Requests()
				if got := after - before; got != int64(len(checks)) {
					t.Errorf("the front answered %d requests, want %d: one each, none replayed", got, len(checks))
				}
				if all, withAuth := rec.Requests(); all != 0 || withAuth != 0 {
					tokens := 0
					for _, a := range rec.Authorizations() {
						if strings.Contains(a, h.token) {
							tokens++
						}
					}
					t.Errorf("the other host received %d requests, %d with an Authorization header, %d of them the member's token", all, withAuth, tokens)
				}
			})
		}
	}
}
