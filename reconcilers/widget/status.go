package widget

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// observedStatus is the status a Widget should show given its Deployment
// (nil when there is none) and the error of writing it, if any.
func observedStatus(w *v1alpha1.Widget, deploy *appsv1.Deployment, applyErr error) v1alpha1.WidgetStatus {
	status := *w.Status.DeepCopy()
	status.ObservedGeneration = w.Generation
	status.Selector = Selector(w)
	status.AvailableReplicas = 0
	if deploy != nil {
		status.AvailableReplicas = deploy.Status.AvailableReplicas
	}
	desired := w.DesiredReplicas()
	ready := metav1.Condition{Type: v1alpha1.WidgetReady, ObservedGeneration: w.Generation}
	switch {
	case applyErr != nil:
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.WidgetDeploymentFailedReason
		ready.Message = v1alpha1.TruncateMessage(fmt.Sprintf("cannot write Deployment: %v", applyErr))
	case status.AvailableReplicas == desired:
		ready.Status, ready.Reason = metav1.ConditionTrue, v1alpha1.WidgetAvailableReason
		ready.Message = fmt.Sprintf("%d/%d replicas available", status.AvailableReplicas, desired)
	default:
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.WidgetProgressingReason
		ready.Message = fmt.Sprintf("%d/%d replicas available", status.AvailableReplicas, desired)
	}
	meta.SetStatusCondition(&status.Conditions, ready)
	return status
}
