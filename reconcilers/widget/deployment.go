package widget

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// Labels on every Widget's Deployment (and, but for managed-by, its pods).
const (
	NameLabel      = "app.kubernetes.io/name"
	InstanceLabel  = "app.kubernetes.io/instance"
	ManagedByLabel = "app.kubernetes.io/managed-by"

	nameValue      = "widget"
	managedByValue = "widgethub"
	containerName  = "widget"
)

// ManagedDeployments selects the Deployments widgethub writes: a member's
// cache holds only those, whatever else the member runs.
func ManagedDeployments() labels.Selector {
	return labels.SelectorFromSet(labels.Set{ManagedByLabel: managedByValue})
}

// podLabels select the pods of one Widget.
func podLabels(w *v1alpha1.Widget) map[string]string {
	return map[string]string{NameLabel: nameValue, InstanceLabel: w.Name}
}

// Selector is the label selector of a Widget's pods, as the scale subresource reports it.
func Selector(w *v1alpha1.Widget) string {
	return labels.SelectorFromSet(podLabels(w)).String()
}

// DesiredDeployment is the Deployment a Widget asks for, as the fields
// widgethub owns: what the reconciler applies, and all it applies. The member
// admission policy (config/member-rbac/admission-policy.yaml) admits this
// shape for the hub's identity and little else; the plugin's tests check the
// two against each other.
func DesiredDeployment(w *v1alpha1.Widget) *appsv1ac.DeploymentApplyConfiguration {
	deployLabels := podLabels(w)
	deployLabels[ManagedByLabel] = managedByValue
	return appsv1ac.Deployment(w.Name, w.Namespace).
		WithLabels(deployLabels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(v1alpha1.GroupVersion.String()).
			WithKind("Widget").
			WithName(w.Name).
			WithUID(w.UID).
			WithController(true).
			WithBlockOwnerDeletion(true)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(w.DesiredReplicas()).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(podLabels(w))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(podLabels(w)).
				WithSpec(corev1ac.PodSpec().
					WithContainers(corev1ac.Container().
						WithName(containerName).
						WithImage(w.DesiredImage())))))
}

// upToDate reports whether current already holds every field desired sets,
// with desired's values: the labels, owner references and containers it
// names among any others, and its replicas and selector as they are. An
// apply would then change nothing that widgethub writes, so none is sent.
//
// It reads the values, not who owns them: a field another manager set to
// widgethub's value is left to it until the value differs, and a field an
// earlier version of widgethub set and this one no longer does is not
// removed. DesiredDeployment always sets the same fields, so the second
// cannot happen within a version. This costs no allocation per reconcile,
// where extracting widgethub's fields from managedFields cost about a
// thousand (BenchmarkUpToDate), and lets a member's cache drop every
// Deployment's managedFields (CacheTransform). TestUpToDateReadsEveryField
// fails when DesiredDeployment sets a field this does not compare.
func upToDate(current *appsv1.Deployment, desired *appsv1ac.DeploymentApplyConfiguration) bool {
	spec, tmpl := desired.Spec, desired.Spec.Template
	return hasLabels(current.Labels, desired.ObjectMetaApplyConfiguration) &&
		hasOwners(current.OwnerReferences, desired.OwnerReferences) &&
		ptr.Equal(current.Spec.Replicas, spec.Replicas) &&
		selectorIs(current.Spec.Selector, spec.Selector) &&
		hasLabels(current.Spec.Template.Labels, tmpl.ObjectMetaApplyConfiguration) &&
		hasContainers(current.Spec.Template.Spec.Containers, tmpl.Spec.Containers)
}

// hasLabels reports whether have holds each of meta's labels.
func hasLabels(have map[string]string, meta *metav1ac.ObjectMetaApplyConfiguration) bool {
	if meta == nil {
		return true
	}
	for k, v := range meta.Labels {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// hasOwners reports whether refs hold each of want, every field it sets equal.
func hasOwners(refs []metav1.OwnerReference, want []metav1ac.OwnerReferenceApplyConfiguration) bool {
	for _, w := range want {
		if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool {
			return same(&r.APIVersion, w.APIVersion) && same(&r.Kind, w.Kind) && same(&r.Name, w.Name) &&
				same(&r.UID, w.UID) && (w.Controller == nil || ptr.Equal(r.Controller, w.Controller)) &&
				(w.BlockOwnerDeletion == nil || ptr.Equal(r.BlockOwnerDeletion, w.BlockOwnerDeletion))
		}) {
			return false
		}
	}
	return true
}

// selectorIs reports whether sel is want: a selector is immutable, so
// another one is a Deployment that the apply cannot make widgethub's.
func selectorIs(sel *metav1.LabelSelector, want *metav1ac.LabelSelectorApplyConfiguration) bool {
	if want == nil {
		return true
	}
	return sel != nil && len(sel.MatchExpressions) == 0 && len(want.MatchExpressions) == 0 &&
		maps.Equal(sel.MatchLabels, want.MatchLabels)
}

// hasContainers reports whether containers hold each of want by name, with
// its image.
func hasContainers(containers []corev1.Container, want []corev1ac.ContainerApplyConfiguration) bool {
	for _, w := range want {
		i := slices.IndexFunc(containers, func(c corev1.Container) bool { return same(&c.Name, w.Name) })
		if i < 0 || !same(&containers[i].Image, w.Image) {
			return false
		}
	}
	return true
}

// same reports whether want is unset or equal to *got.
func same[T comparable](got *T, want *T) bool {
	return want == nil || *got == *want
}
