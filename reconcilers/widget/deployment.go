package widget

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

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

// upToDate reports whether the fields widgethub owns in current already equal desired.
func upToDate(current *appsv1.Deployment, desired *appsv1ac.DeploymentApplyConfiguration) bool {
	owned, err := appsv1ac.ExtractDeployment(current, FieldManager)
	if err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(owned, desired)
}
