package plugin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// decodeList decodes a List printed as format (json or yaml) into items,
// and checks that it is a kubectl List without managedFields.
func decodeList[T any](t *testing.T, format, out string) []T {
	t.Helper()
	var list struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Items      []T            `json:"items"`
	}
	var err error
	if format == "yaml" {
		err = yaml.UnmarshalStrict([]byte(out), &list)
	} else {
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		err = dec.Decode(&list)
	}
	if err != nil {
		t.Fatalf("-o %s: not a List: %v\n%s", format, err, out)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("-o %s: apiVersion %q, kind %q, want a v1 List", format, list.APIVersion, list.Kind)
	}
	if strings.Contains(out, "managedFields") {
		t.Errorf("-o %s prints managedFields, which kubectl leaves out", format)
	}
	return list.Items
}

func TestClustersOutputFormats(t *testing.T) {
	// Two registrations, one the hub reported on, and a ClusterProfile's
	// member. The kubeconfig's key must never be printed.
	kubeconfig := testFleet.Member("alpha").Kubeconfig
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for _, u := range raw.AuthInfos {
		key = base64.StdEncoding.EncodeToString(u.ClientKeyData)
	}
	for _, name := range []string{"out-reported", "out-new"} {
		registerForTest(t, name, kubeconfig)
	}
	reported := &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "out-reported"}, Status: engaged(2)}
	createMemberCluster(t, reported)
	profile := profileMemberCluster("out-profile", engaged(5))
	createMemberCluster(t, profile)

	byName := func(r result) map[string][]string {
		out := map[string][]string{}
		for _, cells := range rows(r.stdout) {
			out[cells[0]] = cells
		}
		return out
	}
	r := mustRun(t, "clusters", "-o", "wide")
	if h := rows(r.stdout)[0]; strings.Join(h, " ") != "NAME READY REASON VERSION WIDGETS SERVER TOKEN-EXPIRES SERVED-BY AGE SOURCE LAST-PROBE MESSAGE" {
		t.Errorf("-o wide header = %q", h)
	}
	got := byName(r)
	// The wide columns follow AGE (cell 8): SOURCE, LAST-PROBE (the status
	// was written moments ago), the Ready message.
	justNow := regexp.MustCompile(`^[0-9]+s$`)
	for name, want := range map[string]struct{ source, lastProbe, message string }{
		"out-reported": {"Secret", "just now", "the member answers its probes"},
		"out-new":      {"Secret", "-", "-"},
		"out-profile":  {"ClusterProfile", "just now", "the member answers its probes"},
	} {
		cells := got[name]
		if len(cells) < 12 || cells[9] != want.source || strings.Join(cells[11:], " ") != want.message ||
			(want.lastProbe == "-") != (cells[10] == "-") || cells[10] != "-" && !justNow.MatchString(cells[10]) {
			t.Errorf("-o wide row of %s = %q, want SOURCE %s, LAST-PROBE %s, MESSAGE %s", name, cells, want.source, want.lastProbe, want.message)
		}
	}

	r = mustRun(t, "clusters", "--no-headers")
	got = byName(r)
	if _, ok := got["NAME"]; ok || len(got["out-reported"]) != 9 || len(got["out-profile"]) != 9 {
		t.Errorf("--no-headers printed a header, or rows of other than 9 columns:\n%s", r.stdout)
	}

	for _, format := range []string{"json", "yaml"} {
		r := mustRun(t, "clusters", "-o", format)
		items := map[string]v1alpha1.MemberCluster{}
		for _, mc := range decodeList[v1alpha1.MemberCluster](t, format, r.stdout) {
			items[mc.Name] = mc
		}
		for _, want := range []*v1alpha1.MemberCluster{reported, profile} {
			mc, ok := items[want.Name]
			switch {
			case !ok:
				t.Errorf("-o %s does not list the MemberCluster %s:\n%s", format, want.Name, r.stdout)
			case mc.APIVersion != "widgethub.io/v1alpha1" || mc.Kind != "MemberCluster" || mc.UID != want.UID ||
				mc.Status.Widgets != want.Status.Widgets || mc.Status.KubernetesVersion != "v1.36.3" ||
				len(mc.Status.Conditions) != 1 || mc.Status.Conditions[0].Message != "the member answers its probes" ||
				!reflect.DeepEqual(mc.OwnerReferences, want.OwnerReferences):
				t.Errorf("-o %s: MemberCluster %s is not the hub's:\n got %+v\nwant %+v", format, want.Name, mc, want)
			}
		}
		if _, ok := items["out-new"]; ok {
			t.Errorf("-o %s lists a MemberCluster for out-new, which has none", format)
		}
		if !strings.Contains(r.stderr, hubNS+"/out-new: no MemberCluster yet") {
			t.Errorf("-o %s does not say on stderr that out-new has no MemberCluster:\n%s", format, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, key) {
			t.Errorf("-o %s printed the registration kubeconfig's client key", format)
		}
	}
}

// listedWidget is a Widget as widgets -o json|yaml prints it.
type listedWidget struct {
	Cluster string `json:"cluster"`
	v1alpha1.Widget
}

func TestWidgetsOutputFormats(t *testing.T) {
	ctx := context.Background()
	joinAlphaAndBeta(t)
	alpha, beta := testFleet.Member("alpha"), testFleet.Member("beta")
	cart := adminWidget(t, alpha, "shop", "cart")
	cart.Status = v1alpha1.WidgetStatus{AvailableReplicas: 1, ObservedGeneration: cart.Generation, Conditions: []metav1.Condition{{Type: v1alpha1.WidgetReady,
		Status: metav1.ConditionTrue, Reason: v1alpha1.WidgetAvailableReason, Message: "1 of 1 available", LastTransitionTime: metav1.Now()}}}
	if err := alpha.Client.Status().Update(ctx, cart); err != nil {
		t.Fatal(err)
	}
	// Its Deployment as the reconciler writes it, with two replicas of which one is ready.
	if err := applyAsReconciler(ctx, alpha.Client, widgetChild(cart, 2)); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := alpha.Client.Get(ctx, client.ObjectKeyFromObject(cart), d); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 1}
	if err := alpha.Client.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	// beta's has no Deployment yet, and another image.
	shelf := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shelf"}, Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](3), Image: "registry.k8s.io/pause:3.9"}}
	ensureNamespace(t, beta, "shop")
	if err := beta.Client.Create(ctx, shelf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = beta.Client.Delete(ctx, shelf) })

	r := mustRun(t, "widgets", "-n", "shop", "-o", "wide")
	got := rows(r.stdout)
	want := [][]string{
		{"CLUSTER", "NAME", "REPLICAS", "AVAILABLE", "READY", "AGE", "REASON", "IMAGE", "GENERATION", "OBSERVED", "DEPLOYMENT"},
		{"alpha", "cart", "1", "1", "True", "*", "Available", v1alpha1.DefaultWidgetImage, "1", "1", "1/2"},
		{"beta", "shelf", "3", "0", "Unknown", "*", "-", "registry.k8s.io/pause:3.9", "1", "0", "<none>"},
	}
	if len(got) != len(want) {
		t.Fatalf("widgets -n shop -o wide printed %d lines, want %d:\n%s", len(got), len(want), r.stdout)
	}
	for i := range want {
		if len(got[i]) == len(want[i]) && want[i][5] == "*" {
			want[i][5] = got[i][5] // the age
		}
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("-o wide line %d = %q, want %q", i, got[i], want[i])
		}
	}

	r = mustRun(t, "widgets", "-n", "shop", "--no-headers")
	if got := rows(r.stdout); len(got) != 2 || got[0][0] != "alpha" || got[1][0] != "beta" {
		t.Errorf("--no-headers printed, want alpha's and beta's Widget and no header:\n%s", r.stdout)
	}

	for _, format := range []string{"json", "yaml"} {
		r := mustRun(t, "widgets", "-A", "-o", format)
		items := decodeList[listedWidget](t, format, r.stdout)
		var keys []string
		for _, w := range items {
			keys = append(keys, w.Cluster+"/"+w.Namespace+"/"+w.Name)
			if w.APIVersion != "widgethub.io/v1alpha1" || w.Kind != "Widget" {
				t.Errorf("-o %s: item %s/%s is a %s %s, want a widgethub.io/v1alpha1 Widget", format, w.Cluster, w.Name, w.APIVersion, w.Kind)
			}
		}
		if !slices.Equal(keys, []string{"alpha/shop/cart", "beta/shop/shelf"}) {
			t.Errorf("-o %s lists %q, want alpha's cart and beta's shelf, each with its member", format, keys)
		}
		if len(items) == 2 && (items[0].UID != cart.UID || items[0].Status.Conditions[0].Message != "1 of 1 available" ||
			items[1].UID != shelf.UID || items[1].Spec.Image != "registry.k8s.io/pause:3.9" || *items[1].Spec.Replicas != 3) {
			t.Errorf("-o %s: the Widgets are not as the members serve them: %+v", format, items)
		}
	}
	// A member without Widgets there still makes a List.
	r = mustRun(t, "widgets", "-n", "nothing-here", "-o", "json")
	if items := decodeList[listedWidget](t, "json", r.stdout); len(items) != 0 {
		t.Errorf("widgets -n nothing-here -o json lists %d Widgets", len(items))
	}
}

func TestOutputRefusesUnknownFormats(t *testing.T) {
	for _, args := range [][]string{{"clusters", "-o", "table"}, {"widgets", "--output=name"}, {"widgets", "-o", "JSON"}} {
		r := run(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "is not an output format: use wide, json or yaml") || r.stdout != "" {
			t.Errorf("kubectl widgethub %s: want exit 2 and the formats named, got %s", strings.Join(args, " "), r)
		}
	}
}
