package widget

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// leaves lists the paths of v's JSON leaves, a list's items by index.
func leaves(prefix string, v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, item := range v {
			leaves(prefix+"."+k, item, out)
		}
	case []any:
		for i, item := range v {
			leaves(fmt.Sprintf("%s[%d]", prefix, i), item, out)
		}
	default:
		*out = append(*out, prefix)
	}
}

// upToDate compares each field DesiredDeployment sets: the test lists them
// (a field added to DesiredDeployment fails it until upToDate and this list
// learn it), and each change of one of them on the member makes the
// Deployment out of date, while what others add to it does not.
func TestUpToDateReadsEveryField(t *testing.T) {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart", UID: "cart-uid"},
		Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](2), Image: "shop/cart:1"}}
	raw, err := json.Marshal(DesiredDeployment(w))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	var got []string
	leaves("", obj, &got)
	slices.Sort(got)
	compared := []string{
		// The object's identity: the reconciler reads the Deployment by it.
		".apiVersion", ".kind", ".metadata.name", ".metadata.namespace",
		".metadata.labels." + InstanceLabel, ".metadata.labels." + ManagedByLabel, ".metadata.labels." + NameLabel,
		".metadata.ownerReferences[0].apiVersion", ".metadata.ownerReferences[0].blockOwnerDeletion",
		".metadata.ownerReferences[0].controller", ".metadata.ownerReferences[0].kind",
		".metadata.ownerReferences[0].name", ".metadata.ownerReferences[0].uid",
		".spec.replicas",
		".spec.selector.matchLabels." + InstanceLabel, ".spec.selector.matchLabels." + NameLabel,
		".spec.template.metadata.labels." + InstanceLabel, ".spec.template.metadata.labels." + NameLabel,
		".spec.template.spec.containers[0].image", ".spec.template.spec.containers[0].name",
	}
	slices.Sort(compared)
	if !slices.Equal(got, compared) {
		t.Fatalf("DesiredDeployment sets\n%q\nupToDate compares\n%q", got, compared)
	}

	untrimmed := liveDeployment(t, w, othersWrite)
	trimmed, _ := CacheTransform(untrimmed.DeepCopy())
	live := trimmed.(*appsv1.Deployment)
	if !upToDate(live, DesiredDeployment(w)) {
		t.Fatal("the Deployment widgethub applied, with what others wrote, is out of date")
	}
	untrimmed.ManagedFields = nil
	if !upToDate(untrimmed, DesiredDeployment(w)) {
		t.Fatal("the Deployment with what others wrote, untrimmed, is out of date")
	}
	for _, c := range []struct {
		field string
		edit  func(*appsv1.Deployment)
	}{
		{"a label's value", func(d *appsv1.Deployment) { d.Labels[ManagedByLabel] = "someone" }},
		{"a label", func(d *appsv1.Deployment) { delete(d.Labels, InstanceLabel) }},
		{"the labels", func(d *appsv1.Deployment) { d.Labels = nil }},
		{"the owner's UID", func(d *appsv1.Deployment) { d.OwnerReferences[0].UID = "old-cart-uid" }},
		{"the owner's name", func(d *appsv1.Deployment) { d.OwnerReferences[0].Name = "till" }},
		{"the owner's kind", func(d *appsv1.Deployment) { d.OwnerReferences[0].Kind = "Gadget" }},
		{"the owner's API version", func(d *appsv1.Deployment) { d.OwnerReferences[0].APIVersion = "widgethub.io/v2" }},
		{"the owner as controller", func(d *appsv1.Deployment) { d.OwnerReferences[0].Controller = nil }},
		{"the owner blocking deletion", func(d *appsv1.Deployment) { d.OwnerReferences[0].BlockOwnerDeletion = ptr.To(false) }},
		{"the owners", func(d *appsv1.Deployment) { d.OwnerReferences = nil }},
		{"the replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) }},
		{"the replicas unset", func(d *appsv1.Deployment) { d.Spec.Replicas = nil }},
		{"the selector", func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}},
		{"the selector's expressions", func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}
		}},
		{"no selector", func(d *appsv1.Deployment) { d.Spec.Selector = nil }},
		{"a pod label", func(d *appsv1.Deployment) { d.Spec.Template.Labels[NameLabel] = "gadget" }},
		{"the pod labels", func(d *appsv1.Deployment) { d.Spec.Template.Labels = nil }},
		{"the image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "shop/cart:0" }},
		{"the container's name", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "cart" }},
		{"the containers", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = nil }},
	} {
		for _, base := range []*appsv1.Deployment{live, untrimmed} {
			d := base.DeepCopy()
			// The cache's selector shares the pod labels' map: one change each.
			d.Spec.Selector.MatchLabels = maps.Clone(d.Spec.Selector.MatchLabels)
			c.edit(d)
			if upToDate(d, DesiredDeployment(w)) {
				t.Errorf("%s changed on the member, and the Deployment is up to date", c.field)
			}
		}
	}
	sidecarFirst := live.DeepCopy()
	sidecarFirst.Spec.Template.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "sidecar:1"}},
		sidecarFirst.Spec.Template.Spec.Containers...)
	if !upToDate(sidecarFirst, DesiredDeployment(w)) {
		t.Error("a sidecar before widgethub's container makes the Deployment out of date")
	}
}
