package widget

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// CacheTransform trims the Widgets and Deployments a member's cache holds to
// what the Reconciler reads (a cache.Options transform; other objects pass
// unchanged). A member's users write what they like into their Widgets and
// Deployments; the hub keeps only:
//
//   - of a Widget: its identity (name, namespace, UID, resourceVersion,
//     generation, creation and deletion timestamps), spec and status;
//     annotations, labels, finalizers, owner references and managed fields
//     go: nothing reads them, and the status patch is computed between two
//     copies of the cached Widget;
//   - of a Deployment: its identity, the labels and the pod template that
//     DesiredDeployment sets (keys NameLabel, InstanceLabel, ManagedByLabel;
//     the container named "widget", its name and image only), its Widget
//     owner references, the managed fields of FieldManager's apply (which
//     ExtractDeployment compares through) and its status; annotations (the
//     revision, kubectl's last-applied configuration), other managers'
//     fields and the rest of the pod template go.
//
// A field DesiredDeployment sets must stay here: the "unchanged Widget
// writes nothing" tests fail otherwise. The transform is idempotent, as the
// informers require.
func CacheTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1alpha1.Widget:
		trimWidget(o)
	case *appsv1.Deployment:
		trimDeployment(o)
	}
	return obj, nil
}

func trimWidget(w *v1alpha1.Widget) {
	trimMeta(&w.ObjectMeta)
	w.Labels = nil
	w.OwnerReferences = nil
	w.ManagedFields = nil
}

func trimDeployment(d *appsv1.Deployment) {
	trimMeta(&d.ObjectMeta)
	d.Labels = onlyKeys(d.Labels, NameLabel, InstanceLabel, ManagedByLabel)
	d.OwnerReferences = widgetOwners(d.OwnerReferences)
	d.ManagedFields = appliedBy(d.ManagedFields, FieldManager)

	tmpl := &d.Spec.Template
	var containers []corev1.Container
	for _, c := range tmpl.Spec.Containers {
		if c.Name == containerName {
			containers = []corev1.Container{{Name: c.Name, Image: c.Image}}
			break
		}
	}
	*tmpl = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: onlyKeys(tmpl.Labels, NameLabel, InstanceLabel)},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

// trimMeta drops what no kind's reconcile reads from its metadata.
func trimMeta(m *metav1.ObjectMeta) {
	m.Annotations = nil
	m.Finalizers = nil
	m.GenerateName = ""
}

// onlyKeys is the part of labels with the given keys, nil when none.
func onlyKeys(labels map[string]string, keys ...string) map[string]string {
	var kept map[string]string
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			if kept == nil {
				kept = make(map[string]string, len(keys))
			}
			kept[k] = v
		}
	}
	return kept
}

// widgetOwners are the owner references to Widgets among refs, nil when none.
func widgetOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var kept []metav1.OwnerReference
	for _, r := range refs {
		if r.Kind == "Widget" && r.APIVersion == v1alpha1.GroupVersion.String() {
			kept = append(kept, r)
		}
	}
	return kept
}

// appliedBy are the entries of manager's server-side apply to the object
// itself (not a subresource) among entries: those ExtractDeployment reads.
func appliedBy(entries []metav1.ManagedFieldsEntry, manager string) []metav1.ManagedFieldsEntry {
	var kept []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			kept = append(kept, e)
		}
	}
	return kept
}
