package widget

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields/managedfieldstest"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// liveDeployment is w's Deployment as a member holds it after widgethub
// applied DesiredDeployment(w) and another manager ("kubectl") then wrote
// edit's changes: its managed fields are computed by server-side apply's own
// field manager from DesiredDeployment, so they follow it.
func liveDeployment(t testing.TB, w *v1alpha1.Widget, edit func(*appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	fm := managedfieldstest.NewTestFieldManager(applyconfigurations.NewTypeConverter(clientgoscheme.Scheme),
		appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if err := fm.Apply(toUnstructured(t, DesiredDeployment(w)), FieldManager, true); err != nil {
		t.Fatalf("apply desired Deployment: %v", err)
	}
	d := fromUnstructured(t, fm.Live())
	edit(d)
	d.ManagedFields = nil
	if err := fm.Update(toUnstructured(t, d), "kubectl"); err != nil {
		t.Fatalf("update as kubectl: %v", err)
	}
	d = fromUnstructured(t, fm.Live())
	d.ManagedFields = fm.ManagedFields()
	return d
}

func toUnstructured(t testing.TB, v any) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	return u
}

func fromUnstructured(t testing.TB, obj runtime.Object) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// othersWrite is what a member's users may add to a Widget's Deployment:
// annotations, labels, containers, a fuller pod template, owners.
func othersWrite(d *appsv1.Deployment) {
	d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "3", "big": strings.Repeat("x", 100<<10)}
	d.Labels["team"] = "shop"
	d.OwnerReferences = append(d.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other-uid"})
	d.Finalizers = []string{"example.com/keep"}
	tmpl := &d.Spec.Template
	tmpl.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
	tmpl.Labels["team"] = "shop"
	tmpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("y", 10<<10)}}
	tmpl.Spec.Containers = append(tmpl.Spec.Containers, corev1.Container{Name: "sidecar", Image: "sidecar:1"})
	tmpl.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	d.Spec.MinReadySeconds = 5
}

func TestCacheTransformKeepsWhatTheComparisonReads(t *testing.T) {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", UID: "cart-uid"},
		Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](2), Image: "shop/cart:1"}}
	changed := w.DeepCopy()
	changed.Spec.Image = "shop/cart:2"
	for _, c := range []struct {
		name string
		edit func(*appsv1.Deployment)
	}{
		{"as widgethub wrote it", func(*appsv1.Deployment) {}},
		{"with what others wrote", othersWrite},
	} {
		t.Run(c.name, func(t *testing.T) {
			live := liveDeployment(t, w, c.edit)
			live.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue}}}
			if !upToDate(live, DesiredDeployment(w)) {
				t.Fatal("the untrimmed Deployment is not up to date: the fixture is wrong")
			}
			trimmed, _ := CacheTransform(live.DeepCopy())
			d := trimmed.(*appsv1.Deployment)
			if !upToDate(d, DesiredDeployment(w)) {
				t.Error("trimmed: an unchanged Widget would write its Deployment")
			}
			if upToDate(d, DesiredDeployment(changed)) {
				t.Error("trimmed: a changed image would not be written")
			}
			if !equality.Semantic.DeepEqual(d.Status, live.Status) {
				t.Errorf("status changed: %+v", d.Status)
			}
			if d.Name != live.Name || d.UID != live.UID || d.Generation != live.Generation || d.ResourceVersion != live.ResourceVersion {
				t.Errorf("identity changed: %+v", d.ObjectMeta)
			}
			if len(d.Annotations) != 0 || len(d.Finalizers) != 0 || len(d.Spec.Template.Annotations) != 0 ||
				len(d.Spec.Template.Spec.Volumes) != 0 || len(d.Spec.Template.Spec.Containers) != 1 ||
				len(d.Spec.Template.Spec.Containers[0].Env) != 0 || d.Labels["team"] != "" || len(d.OwnerReferences) != 1 {
				t.Errorf("kept what the reconciler never reads: %+v", d)
			}
			if len(live.ManagedFields) == 0 || len(d.ManagedFields) != 0 {
				t.Errorf("kept %d of the %d managed fields entries", len(d.ManagedFields), len(live.ManagedFields))
			}
			again, _ := CacheTransform(d.DeepCopy())
			if !equality.Semantic.DeepEqual(again, d) {
				t.Error("the transform is not idempotent")
			}
		})
	}
}

func TestCacheTransformKeepsWhatTheWidgetReconcileReads(t *testing.T) {
	now := metav1.Now()
	w := &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", UID: "cart-uid", ResourceVersion: "7", Generation: 3,
			DeletionTimestamp: &now, Labels: map[string]string{"team": "shop"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("z", 100<<10)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}, {Manager: FieldManager}}, Finalizers: []string{"x"}},
		Spec:   v1alpha1.WidgetSpec{Replicas: ptr.To[int32](2), Image: "shop/cart:1"},
		Status: v1alpha1.WidgetStatus{AvailableReplicas: 1, ObservedGeneration: 2, Selector: "a=b"},
	}
	trimmed, _ := CacheTransform(w.DeepCopy())
	got := trimmed.(*v1alpha1.Widget)
	want := w.DeepCopy()
	want.Labels, want.Annotations, want.ManagedFields, want.Finalizers = nil, nil, nil, nil
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed Widget:\n got %+v\nwant %+v", got, want)
	}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": "b"}}}
	if out, _ := CacheTransform(other.DeepCopy()); !equality.Semantic.DeepEqual(out, other) {
		t.Error("an object of another kind was changed")
	}
}

// A member's users may write megabytes into the fields the cache keeps, and
// a real API server bounds them only by its 1.5 MiB an object: a tenant who
// may edit Deployments labels one as widgethub's, gives it a 1.4 MiB image,
// thousands of owner references and conditions of 1 MiB messages, and
// writes a 1 MiB status.selector into a Widget. The cache holds a few KiB
// of each, and the reconcile reads the same from them: the same status, and
// a Deployment to write.
func TestCacheTransformBoundsWhatUsersWrite(t *testing.T) {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", UID: "cart-uid", Generation: 1},
		Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](2), Image: "shop/cart:1"}}
	mib := strings.Repeat("é", 1<<19) // 1 MiB of two-byte runes, cut between them
	live := liveDeployment(t, w, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = strings.Repeat("i", 1400<<10)
		// Decoys before widgethub's own reference.
		var decoys []metav1.OwnerReference
		for i := range 3000 {
			decoys = append(decoys,
				metav1.OwnerReference{APIVersion: widgetAPIVersion, Kind: "Widget", Name: "cart", UID: types.UID(fmt.Sprint("decoy-", i))},
				metav1.OwnerReference{APIVersion: widgetAPIVersion, Kind: "Widget", Name: fmt.Sprint("other-", i), UID: types.UID(fmt.Sprint("other-", i))})
		}
		d.OwnerReferences = append(decoys, d.OwnerReferences...)
	})
	live.Generation, live.Status.ObservedGeneration = 1, 1
	for _, c := range []appsv1.DeploymentConditionType{appsv1.DeploymentAvailable, "Custom", appsv1.DeploymentProgressing} {
		live.Status.Conditions = append(live.Status.Conditions, appsv1.DeploymentCondition{Type: c, Status: corev1.ConditionTrue, Reason: mib, Message: mib})
	}
	for range 30000 { // a status writer's, all of a type progress reads, and then a stall
		live.Status.Conditions = append(live.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue})
	}
	live.Status.Conditions = append(live.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: mib, Message: mib})
	trimmed, _ := CacheTransform(live.DeepCopy())
	d := trimmed.(*appsv1.Deployment)
	if !slices.ContainsFunc(d.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == w.UID && ptr.Deref(r.Controller, false) }) {
		t.Errorf("widgethub's controller reference, after 3,000 decoys, was not kept: %v", d.OwnerReferences)
	}
	if size := jsonSize(t, d); size > 16<<10 {
		t.Errorf("the cached Deployment is %d bytes of JSON, more than 16 KiB", size)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "" {
		t.Errorf("kept an image of %d bytes", len(img))
	}
	if upToDate(d, DesiredDeployment(w)) {
		t.Error("the Deployment would not be written with the Widget's image")
	}
	if n := len(d.OwnerReferences); n == 0 || n > maxWidgetOwners || slices.ContainsFunc(d.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Name != "cart" }) {
		t.Errorf("kept %d owner references: %v", n, d.OwnerReferences)
	}
	untimed := func(s v1alpha1.WidgetStatus) v1alpha1.WidgetStatus {
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return s
	}
	if got, want := untimed(observedStatus(w, d, false, nil)), untimed(observedStatus(w, live, false, nil)); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("the Widget's status from the cached Deployment differs:\n got %.300v\nwant %.300v", got, want)
	}
	if n := len(d.Status.Conditions); n != 2 {
		t.Errorf("kept %d conditions, want the first Progressing and the stall", n)
	}
	if got := observedStatus(w, d, false, nil); meta.FindStatusCondition(got.Conditions, v1alpha1.WidgetStalled) == nil {
		t.Error("the stall after 30,000 conditions was not kept")
	}

	// A selector that can never be widgethub's, however large, is held as
	// one that cannot either.
	foreignSel := live.DeepCopy()
	foreignSel.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn, Values: []string{mib}}}
	trimmedSel, _ := CacheTransform(foreignSel.DeepCopy())
	if sel := trimmedSel.(*appsv1.Deployment).Spec.Selector; sel != foreignSelector || selectorIs(sel, DesiredDeployment(w).Spec.Selector) {
		t.Errorf("a selector of 1 MiB expressions is held as %.200v", sel)
	}

	w.Status.Selector = mib
	trimmedWidget, _ := CacheTransform(w.DeepCopy())
	if sel := trimmedWidget.(*v1alpha1.Widget).Status.Selector; sel != "" {
		t.Errorf("kept a status.selector of %d bytes", len(sel))
	}
	for _, obj := range []runtime.Object{d, trimmedWidget.(*v1alpha1.Widget)} {
		if again, _ := CacheTransform(obj.DeepCopyObject()); !equality.Semantic.DeepEqual(again, obj) {
			t.Errorf("the transform is not idempotent on %T", obj)
		}
	}
}

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(raw)
}

// The trimmed Deployment holds no defaulted field nothing reads, and holds
// the strings every Deployment repeats as this package's constants and its
// selector as its pod template's labels: what a member's cache costs per
// Deployment (make bench-cache).
func TestCacheTransformHoldsRepeatedValuesOnce(t *testing.T) {
	fresh := func(s string) string { return strings.Clone(s) } // as a decoder allocates them
	labels := func() map[string]string {
		return map[string]string{fresh(NameLabel): fresh(nameValue), fresh(InstanceLabel): fresh("cart")}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart",
			Labels:          map[string]string{fresh(NameLabel): fresh(nameValue), fresh(InstanceLabel): fresh("cart"), fresh(ManagedByLabel): fresh(managedByValue)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh(v1alpha1.GroupVersion.String()), Kind: fresh("Widget"), Name: fresh("cart"), UID: "u"}}},
		Spec: appsv1.DeploymentSpec{
			Selector:                &metav1.LabelSelector{MatchLabels: labels()},
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: fresh(containerName), Image: "shop/cart:1", TerminationMessagePath: "/dev/termination-log"}}}},
		},
	}
	out, _ := CacheTransform(d)
	d = out.(*appsv1.Deployment)
	if d.Spec.Strategy.Type != "" || d.Spec.RevisionHistoryLimit != nil || d.Spec.ProgressDeadlineSeconds != nil {
		t.Errorf("kept defaulted fields: strategy %+v, revision history limit %v, progress deadline %v",
			d.Spec.Strategy, d.Spec.RevisionHistoryLimit, d.Spec.ProgressDeadlineSeconds)
	}
	same := func(what, got, want string) {
		if got != want || unsafe.StringData(got) != unsafe.StringData(want) {
			t.Errorf("%s: %q is a copy of its own, want the shared %q", what, got, want)
		}
	}
	for _, m := range []map[string]string{d.Labels, d.Spec.Template.Labels} {
		for k, v := range m {
			switch k {
			case NameLabel:
				same("label "+k, v, nameValue)
			case InstanceLabel:
				same("label "+k, v, d.Name)
			case ManagedByLabel:
				same("label "+k, v, managedByValue)
			}
		}
		for k := range m {
			found := false
			for _, c := range []string{NameLabel, InstanceLabel, ManagedByLabel} {
				found = found || unsafe.StringData(k) == unsafe.StringData(c)
			}
			if !found {
				t.Errorf("label key %q is a copy of its own", k)
			}
		}
	}
	o := d.OwnerReferences[0]
	same("owner API version", o.APIVersion, widgetAPIVersion)
	same("owner name", o.Name, d.Name)
	same("container name", d.Spec.Template.Spec.Containers[0].Name, containerName)
	if reflect.ValueOf(d.Spec.Selector.MatchLabels).UnsafePointer() != reflect.ValueOf(d.Spec.Template.Labels).UnsafePointer() {
		t.Error("the selector holds a copy of the pod template's labels")
	}
}

// BenchmarkUpToDate is the comparison every reconcile of an existing
// Deployment makes, with the DesiredDeployment it compares against, on a
// Deployment as the member's cache holds it:
// `go test -run '^$' -bench UpToDate -benchmem ./reconcilers/widget/`.
func BenchmarkUpToDate(b *testing.B) {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", UID: "cart-uid"},
		Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](2), Image: "shop/cart:1"}}
	trimmed, _ := CacheTransform(liveDeployment(b, w, othersWrite))
	d := trimmed.(*appsv1.Deployment)
	b.ReportAllocs()
	for b.Loop() {
		if !upToDate(d, DesiredDeployment(w)) {
			b.Fatal("an unchanged Widget's Deployment is not up to date")
		}
	}
}
