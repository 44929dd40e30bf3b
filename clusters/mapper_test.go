package clusters_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/clusters/connect"
	"github.com/widgethub/widgethub/internal/fleet"
)

var widgetKind = schema.GroupKind{Group: "widgethub.io", Kind: "Widget"}

// pathRecorder records the path of every request a member's client sends.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
	next  http.RoundTripper
}

func (p *pathRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.paths = append(p.paths, req.URL.Path)
	p.mu.Unlock()
	return p.next.RoundTrip(req)
}

func (p *pathRecorder) WrappedRoundTripper() http.RoundTripper { return p.next }

func (p *pathRecorder) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	paths := p.paths
	p.paths = nil
	return paths
}

// A member's RESTMapper discovers only the group version it is asked about,
// not every group the member serves (a quarter of the hub's heap per member
// when it did), and asks again after a miss: a CRD installed later is found.
func TestMemberMapperDiscoversOneGroupVersion(t *testing.T) {
	f, err := fleet.Start(fleet.Options{BareMembers: []string{"bare"}, Scheme: clusters.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	cp := f.Member("bare")
	cfg, err := connect.RESTConfig(cp.Kubeconfig, connect.ConfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &pathRecorder{}
	cfg.REST.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	m, err := clusters.New("bare", cfg, clusters.MemberOptions{Scheme: clusters.NewScheme(), Logger: ctrl.Log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	mapper := m.GetRESTMapper()
	const gvPath = "/apis/widgethub.io/v1alpha1"

	if _, err := mapper.RESTMapping(widgetKind, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("Widget without its CRD: got %v, want a no-match error", err)
	}
	if got := rec.take(); !slices.Equal(got, []string{gvPath}) {
		t.Errorf("discovery of the missing Widget asked %q, want only %s", got, gvPath)
	}

	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: fleet.CRDPaths(), ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	mapping, err := mapper.RESTMapping(widgetKind) // no version: the scheme's
	if err != nil {
		t.Fatalf("Widget once its CRD is installed: %v", err)
	}
	if mapping.Resource.Resource != "widgets" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("Widget maps to %s (%s), want widgets (namespaced)", mapping.Resource, mapping.Scope.Name())
	}
	// A cache over several namespaces asks about the list's kind.
	list := schema.GroupKind{Group: widgetKind.Group, Kind: "WidgetList"}
	if mapping, err := mapper.RESTMapping(list, "v1alpha1"); err != nil || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("WidgetList: got %v, %v; want a namespaced mapping", mapping, err)
	}
	if got := rec.take(); !slices.Equal(got, []string{gvPath}) {
		t.Errorf("discovery after the CRD was installed asked %q, want %s once", got, gvPath)
	}
}

// A member's answer to the discovery of a group version is bounded.
func TestMemberMapperBoundsTheDiscoveryAnswer(t *testing.T) {
	h := startHostileMember(t)
	h.answer(t, "/apis/widgethub.io/v1alpha1", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"widgethub.io/v1alpha1","resources":[`))
		entry := `{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["get"]},`
		_, _ = w.Write([]byte(strings.Repeat(entry, (2<<20)/len(entry))))
		_, _ = w.Write([]byte(`{"name":"widgets","namespaced":true,"kind":"Widget","verbs":["get"]}]}`))
	}))
	if _, err := h.member.GetRESTMapper().RESTMapping(widgetKind, "v1alpha1"); !errors.Is(err, connect.ErrResponseTooLarge) {
		t.Errorf("a 2 MiB discovery answer: got %v, want %v", err, connect.ErrResponseTooLarge)
	}
}

// A member's discovery document is its word (an aggregated API's, for its
// group): a resource whose name is not one path segment is not mapped, so
// no request of the hub takes its path from it.
func TestMemberMapperTakesNoPathFromDiscovery(t *testing.T) {
	h := startHostileMember(t)
	h.answer(t, "/apis/widgethub.io/v1alpha1", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"widgethub.io/v1alpha1","resources":[` +
			`{"name":"..","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["get","list"]}]}`))
	}))
	if m, err := h.member.GetRESTMapper().RESTMapping(widgetKind, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Errorf("Widget served as resource \"..\": got %v, %v; want a no-match error", m, err)
	}
}
