package plugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// hostileText is what a member may choose to make a terminal lie: it clears
// the screen, sets the window title, and turns the rest of the line around.
const hostileText = "\x1b[2J\x1b]0;owned\x07\u202e"

// expectNothingVerbatim fails if out holds a rune that a terminal acts on or
// hides (an ESC, BEL, a bidi override).
func expectNothingVerbatim(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.IndexFunc(out, func(r rune) bool { return r == 0x1b || r == 0x07 || r == 0x202e }); i >= 0 {
		t.Errorf("%s prints a member's control characters verbatim at byte %d: %q", what, i, out)
	}
}

// A MemberCluster's status as a hub of another version, or anyone allowed to
// write it, may leave it: what the plugin prints of it is escaped.
func TestClustersPrintsNoMemberTextVerbatim(t *testing.T) {
	ctx := context.Background()
	status := engaged(3)
	status.KubernetesVersion, status.ServedBy = "v1.36.3"+hostileText, "replica\tspoofed\n"+hostileText
	// As long a message as a Condition may hold.
	status.Conditions[0].Message = strings.Repeat(hostileText, 32<<10/len(hostileText))
	mc := profileMemberCluster("hostile-status", status)
	createMemberCluster(t, mc)
	// The CRD bounds the version: a member's whole answer cannot land there.
	invalid := mc.DeepCopy()
	invalid.Status.KubernetesVersion = strings.Repeat("v", v1alpha1.MaxVersionLength+1)
	if err := testFleet.Hub.Client.Status().Update(ctx, invalid); !apierrors.IsInvalid(err) {
		t.Fatalf("a kubernetesVersion of %d bytes: %v, want it refused as invalid", v1alpha1.MaxVersionLength+1, err)
	}

	for _, format := range []string{"wide", "json", "yaml"} {
		r := mustRun(t, "clusters", "-o", format)
		expectNothingVerbatim(t, "clusters -o "+format, r.stdout+r.stderr)
		if !strings.Contains(r.stdout, "hostile-status") {
			t.Errorf("clusters -o %s does not show the hostile MemberCluster:\n%s", format, r.stdout)
		}
		// Of the 32 KiB message, a cell shows 253 bytes and a List 4 KiB.
		if len(r.stdout) > 8<<10 {
			t.Errorf("clusters -o %s printed %d bytes, want the member's message bounded", format, len(r.stdout))
		}
	}
	r := mustRun(t, "clusters")
	expectNothingVerbatim(t, "clusters", r.stdout+r.stderr)
	for _, cells := range rows(r.stdout) {
		if cells[0] == "hostile-status" {
			if got, want := strings.Join(cells[:8], " "), `hostile-status True Engaged v1.36.3\x1b[2J\x1b]0;owned\x07\u202e 3 (ClusterProfile) - replica\x09spoofed\x0a\x1b[2J\x1b]0;owned\x07\u202e`; got != want {
				t.Errorf("row = %q\nwant  %q", got, want)
			}
			return
		}
	}
	t.Fatalf("clusters does not list the hostile MemberCluster:\n%s", r.stdout)
}

// A member answers a Widget list with names and statuses of its choosing,
// and an error with a body of its choosing: widgets prints neither verbatim,
// and prints the error bounded.
func TestWidgetsPrintsNoMemberTextVerbatim(t *testing.T) {
	joinAlphaAndBeta(t)
	alpha := testFleet.Member("alpha")
	widgets := v1alpha1.WidgetList{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "WidgetList"},
		Items: []v1alpha1.Widget{{
			TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Widget"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop" + hostileText, Name: "cart\n" + hostileText, CreationTimestamp: metav1.Now(),
				Annotations: map[string]string{"note" + hostileText: strings.Repeat(hostileText, 64<<10/len(hostileText))}},
			Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](1)},
			Status: v1alpha1.WidgetStatus{Conditions: []metav1.Condition{{Type: v1alpha1.WidgetReady,
				Status: metav1.ConditionStatus("True" + hostileText), Reason: v1alpha1.WidgetAvailableReason}}},
		}}}
	listing := hostileFront(t, alpha, func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/widgets") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(widgets)
		return true
	})
	failing := hostileFront(t, alpha, func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/widgets") {
			return false
		}
		// client-go quotes a body it cannot decode, but shows the message of
		// a Status as it comes.
		status := apierrors.NewInternalError(errors.New(strings.Repeat(hostileText, 1<<16))).ErrStatus // 1 MiB
		status.APIVersion, status.Kind = "v1", "Status"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(status)
		return true
	})
	for name, front := range map[string]*fleet.Front{"hostile-names": listing, "hostile-error": failing} {
		doc, err := front.Kubeconfig(alpha.Kubeconfig, "not-passed-on")
		if err != nil {
			t.Fatal(err)
		}
		registerForTest(t, name, doc)
	}

	r := run(t, "widgets", "-A")
	expectNothingVerbatim(t, "widgets", r.stdout+r.stderr)
	want := `hostile-names shop\x1b[2J\x1b]0;owned\x07\u202e cart\x0a\x1b[2J\x1b]0;owned\x07\u202e 1 0 True\x1b[2J\x1b]0;owned\x07\u202e`
	if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
		t.Errorf("widgets -A does not show the hostile member's Widget escaped as %q:\n%s", want, r.stdout)
	}
	if !strings.Contains(r.stderr, `error: cluster "hostile-error": list Widgets:`) {
		t.Errorf("widgets -A does not report the member whose list failed:\n%s", r.stderr)
	}
	if len(r.stderr) > 8<<10 {
		t.Errorf("widgets -A printed %d bytes on stderr for one member's error, want them bounded", len(r.stderr))
	}
	for _, format := range []string{"wide", "json", "yaml"} {
		r := run(t, "widgets", "-A", "-o", format)
		expectNothingVerbatim(t, "widgets -o "+format, r.stdout+r.stderr)
		if !strings.Contains(r.stdout, "hostile-names") {
			t.Errorf("widgets -A -o %s does not show the hostile member's Widget:\n%s", format, r.stdout)
		}
		// Of the 64 KiB annotation, a List shows 4 KiB.
		if len(r.stdout) > 16<<10 || len(r.stderr) > 8<<10 {
			t.Errorf("widgets -A -o %s printed %d bytes on stdout and %d on stderr, want the member's text bounded", format, len(r.stdout), len(r.stderr))
		}
	}
}

// A member's discovery document is its word (an aggregated API's, for its
// group): a resource named "..", which client-go's dynamic client would
// join into the path of the next request, leaves the kind unserved, and no
// request goes anywhere but where the kind's resource would be.
func TestPluginTakesNoPathFromAMembersDiscovery(t *testing.T) {
	asked := registerWidgetDiscovery(t, "dotdot-resource", metav1.APIResource{Name: "..", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "list"}})
	for _, args := range [][]string{{"widgets", "-A"}, {"widgets", "-n", "shop"}} {
		r := run(t, args...)
		if want := `cluster "dotdot-resource": list Widgets: no matches for kind "Widget"`; !strings.Contains(r.stderr, want) {
			t.Errorf("%s: want the member reported as not serving Widgets (%q):\n%s", strings.Join(args, " "), want, r.stderr)
		}
	}
	paths := asked()
	for _, p := range paths {
		if strings.HasPrefix(p, "/apis/"+v1alpha1.GroupVersion.Group) && p != widgetDiscovery {
			t.Errorf("the plugin sent a request to %s, a path the member's discovery document made", p)
		}
	}
	if !slices.Contains(paths, widgetDiscovery) {
		t.Errorf("the plugin never read the member's discovery document %s (requests: %v)", widgetDiscovery, paths)
	}
}

// A member's discovery document is read up to a bound, as the hub reads a
// member's (1 MiB): one of 2 MiB fails the member, not the plugin.
func TestPluginBoundsAMembersDiscovery(t *testing.T) {
	registerWidgetDiscovery(t, "huge-discovery", metav1.APIResource{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"get", "list"},
		Categories: slices.Repeat([]string{strings.Repeat("x", 1<<10)}, 2<<10)})
	r := run(t, "widgets", "-A")
	if want := `cluster "huge-discovery": list Widgets: discover the resources of ` + v1alpha1.GroupVersion.String(); !strings.Contains(r.stderr, want) ||
		!strings.Contains(r.stderr, "larger than 1048576 bytes") {
		t.Errorf("widgets -A: want the member's 2 MiB discovery document refused (%q, larger than 1048576 bytes):\n%s", want, r.stderr)
	}
}

// widgetDiscovery is the discovery document of the Widgets' group version.
var widgetDiscovery = "/apis/" + v1alpha1.GroupVersion.String()

// registerWidgetDiscovery registers, for the test, member name: alpha behind
// a front that answers widgetDiscovery with widgets alone. asked returns the
// paths the front was asked for so far.
func registerWidgetDiscovery(t *testing.T, name string, widgets metav1.APIResource) (asked func() []string) {
	t.Helper()
	alpha := testFleet.Member("alpha")
	var mu sync.Mutex
	var paths []string
	front := hostileFront(t, alpha, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != widgetDiscovery {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: v1alpha1.GroupVersion.String(),
			APIResources: []metav1.APIResource{widgets},
		})
		return true
	})
	doc, err := front.Kubeconfig(alpha.Kubeconfig, "not-passed-on")
	if err != nil {
		t.Fatal(err)
	}
	registerForTest(t, name, doc)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(paths)
	}
}

// hostileFront starts a fleet.Front before cp for the test.
func hostileFront(t *testing.T, cp *fleet.ControlPlane, answer fleet.Answer) *fleet.Front {
	t.Helper()
	f, err := fleet.NewFront(cp, answer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}
