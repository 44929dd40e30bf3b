package widget

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
//     the container named "widget", its name and image only), its owner
//     references to the Widget it is named after, its replicas and
//     selector, and its status but for the conditions progress does not
//     read; annotations (the revision, kubectl's last-applied
//     configuration), managed fields (upToDate compares values, not
//     owners) and the rest of the pod template go.
//
// What a member's users write into the fields kept is bounded too, where a
// real API server bounds it no further than its 1.5 MiB an object: a
// Deployment's image longer than a Widget's may be is held as "" (it then
// differs from every Widget's image, so the reconciler writes its Widget's),
// a selector that cannot be widgethub's as foreignSelector, at most
// maxWidgetOwners owner references are kept (the controller among them),
// at most three conditions (progressConditions), and a kept condition's
// message and reason are cut to v1alpha1.MaxMessageLength bytes, as much as
// progress's message can hold. A Widget's status.selector longer than
// maxSelectorLength is held as "" (the reconciler writes Selector's).
//
// Fields the API server defaults and nothing reads go too: a Deployment's
// strategy, revision history limit and progress deadline. Strings that every
// object repeats (label keys, condition types and reasons) are
// replaced by this package's constants, and the name where it repeats, so
// that each object does not hold copies of its own; the Deployment's
// selector shares the map of its pod template's labels when the two are
// equal. Cached objects are read-only, so sharing is safe.
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

// Bounds of what a cached object keeps of its users' text (see
// CacheTransform).
const (
	// maxWidgetOwners bounds a Deployment's owner references kept: it has
	// one, to its Widget, when widgethub wrote it.
	maxWidgetOwners = 4
	// maxSelectorLength bounds a Widget's status.selector kept; Selector's
	// is about 100 bytes.
	maxSelectorLength = 1024
)

func trimWidget(w *v1alpha1.Widget) {
	trimMeta(&w.ObjectMeta)
	w.Labels = nil
	w.OwnerReferences = nil
	w.ManagedFields = nil
	if len(w.Status.Selector) > maxSelectorLength {
		w.Status.Selector = ""
	}
	for i := range w.Status.Conditions {
		c := &w.Status.Conditions[i]
		c.Type, c.Reason, c.Message = canonical(c.Type), canonical(c.Reason), canonical(c.Message)
		c.Status = metav1.ConditionStatus(canonical(string(c.Status)))
	}
}

func trimDeployment(d *appsv1.Deployment) {
	trimMeta(&d.ObjectMeta)
	d.Labels = onlyKeys(d.Labels, d.Name, NameLabel, InstanceLabel, ManagedByLabel)
	d.OwnerReferences = widgetOwners(d.OwnerReferences, d.Name)
	d.ManagedFields = nil

	// Defaulted by the API server; widgethub neither sets nor reads them.
	d.Spec.Strategy = appsv1.DeploymentStrategy{}
	d.Spec.RevisionHistoryLimit = nil
	d.Spec.ProgressDeadlineSeconds = nil

	tmpl := &d.Spec.Template
	var containers []corev1.Container
	for i, c := range tmpl.Spec.Containers {
		if c.Name == containerName {
			containers = tmpl.Spec.Containers[i : i+1 : i+1]
			if len(tmpl.Spec.Containers) > 1 {
				containers = make([]corev1.Container, 1)
			}
			containers[0] = corev1.Container{Name: containerName, Image: c.Image}
			if len(c.Image) > v1alpha1.MaxWidgetImageLength {
				containers[0].Image = ""
			}
			break
		}
	}
	*tmpl = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: onlyKeys(tmpl.Labels, d.Name, NameLabel, InstanceLabel)},
		Spec:       corev1.PodSpec{Containers: containers},
	}
	if sel := d.Spec.Selector; sel != nil && len(sel.MatchExpressions) == 0 && maps.Equal(sel.MatchLabels, tmpl.Labels) {
		sel.MatchLabels = tmpl.Labels
	} else if foreign(sel) {
		d.Spec.Selector = foreignSelector
	}
	d.Status.Conditions = progressConditions(d.Status.Conditions)
	for i := range d.Status.Conditions {
		c := &d.Status.Conditions[i]
		c.Reason, c.Message = canonical(v1alpha1.Cut(c.Reason, v1alpha1.MaxMessageLength)), canonical(v1alpha1.Cut(c.Message, v1alpha1.MaxMessageLength))
	}
}

// foreignSelector stands, in the cache, for a Deployment's selector that
// selectorIs can never take for widgethub's, whatever its size: one with
// expressions, or with a label widgethub's has not, or a value longer than
// a name. It is shared, and never changed.
var foreignSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: "widgethub.io/not-a-widget-selector", Operator: metav1.LabelSelectorOpExists}}}

func foreign(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	if len(sel.MatchExpressions) > 0 {
		return true
	}
	for k, v := range sel.MatchLabels {
		if (k != NameLabel && k != InstanceLabel) || len(v) > v1alpha1.MaxNameLength {
			return true
		}
	}
	return false
}

// progressConditions are the conditions of conds that progress reads, in
// their order: the first that stalls a rollout, and the first of each type
// progress reads (Progressing, ReplicaFailure), at most three of however
// many a member sends. progress reports the first that stalls, so it reads
// the same from them as from conds.
func progressConditions(conds []appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	firstStall, firstProgressing, firstFailure := -1, -1, -1
	for i, c := range conds {
		switch {
		case firstStall < 0 && stallsRollout(c):
			firstStall = i
		case firstProgressing < 0 && c.Type == appsv1.DeploymentProgressing:
			firstProgressing = i
		case firstFailure < 0 && c.Type == appsv1.DeploymentReplicaFailure:
			firstFailure = i
		}
	}
	var kept []appsv1.DeploymentCondition
	for i, c := range conds {
		if i == firstStall || i == firstProgressing || i == firstFailure {
			kept = append(kept, c)
		}
	}
	return kept
}

// trimMeta drops what no kind's reconcile reads from its metadata.
func trimMeta(m *metav1.ObjectMeta) {
	m.Annotations = nil
	m.Finalizers = nil
	m.GenerateName = ""
}

// onlyKeys is the part of labels with the given keys, nil when none: labels
// itself when it has no other key. Keys become the constants given, values
// canonical strings (name for a value equal to it).
func onlyKeys(labels map[string]string, name string, keys ...string) map[string]string {
	n := 0
	for _, k := range keys {
		if _, ok := labels[k]; ok {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	kept := labels
	if n < len(labels) {
		kept = make(map[string]string, n)
	}
	for _, k := range keys {
		v, ok := labels[k]
		if !ok {
			continue
		}
		if v == name {
			v = name
		} else {
			v = canonical(v)
		}
		kept[k] = v // an existing string key is replaced too
	}
	return kept
}

// widgetOwners are the owner references among refs to the Widget named
// name, in their order, at most maxWidgetOwners of them, the controller
// (there is at most one) always among them; nil when none. The controller
// reference is what maps the Deployment's events to its Widget, and what
// hasOwners looks for.
func widgetOwners(refs []metav1.OwnerReference, name string) []metav1.OwnerReference {
	isOwner := func(r metav1.OwnerReference) bool {
		return r.Kind == "Widget" && r.APIVersion == widgetAPIVersion && r.Name == name
	}
	controller := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return isOwner(r) && ptr.Deref(r.Controller, false) })
	var kept []metav1.OwnerReference
	room := maxWidgetOwners
	if controller >= 0 {
		room-- // kept for the controller
	}
	for i, r := range refs {
		if !isOwner(r) || (i != controller && room == 0) {
			continue
		}
		if i != controller {
			room--
		}
		r.Kind, r.APIVersion, r.Name = "Widget", widgetAPIVersion, name
		kept = append(kept, r)
	}
	return kept
}

var widgetAPIVersion = v1alpha1.GroupVersion.String()

// canonicals are the strings cached objects repeat, each held once.
var canonicals = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		nameValue, managedByValue, widgetAPIVersion,
		string(metav1.ConditionTrue), string(metav1.ConditionFalse), string(metav1.ConditionUnknown),
		v1alpha1.WidgetReady, v1alpha1.WidgetReconciling, v1alpha1.WidgetStalled,
		v1alpha1.WidgetAvailableReason, v1alpha1.WidgetProgressingReason, v1alpha1.WidgetDeploymentFailedReason,
		v1alpha1.WidgetDeploymentPendingReason, v1alpha1.WidgetRollingOutReason, v1alpha1.WidgetDeploymentRetryingReason,
		deploymentPendingMessage,
		// A Deployment's usual condition reasons (the Deployment controller's).
		"NewReplicaSetAvailable", "MinimumReplicasAvailable", "MinimumReplicasUnavailable", "ReplicaSetUpdated",
		"NewReplicaSetCreated", "FoundNewReplicaSet", progressDeadlineExceeded,
		"Deployment has minimum availability.", "Deployment does not have minimum availability.",
	} {
		m[s] = s
	}
	return m
}()

// canonical is s, as this package's constant when it has one.
func canonical(s string) string {
	if c, ok := canonicals[s]; ok {
		return c
	}
	return s
}
