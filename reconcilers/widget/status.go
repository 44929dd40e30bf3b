package widget

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// progressDeadlineExceeded is the reason of a Deployment's Progressing
// condition once its rollout made no progress for progressDeadlineSeconds.
const progressDeadlineExceeded = "ProgressDeadlineExceeded"

// stallsRollout is whether c says the Deployment's rollout stalled: its
// progress deadline passed, or it cannot create pods.
func stallsRollout(c appsv1.DeploymentCondition) bool {
	return (c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == progressDeadlineExceeded) ||
		(c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue)
}

// deploymentPendingMessage is the message of Reconciling with reason
// DeploymentPending.
const deploymentPendingMessage = "waiting for the Deployment controller to observe the Deployment's latest spec"

// observedStatus is the status a Widget should show given its Deployment
// (nil when there is none), whether this reconcile wrote it (applied), and
// the error of writing it, if any.
func observedStatus(w *v1alpha1.Widget, deploy *appsv1.Deployment, applied bool, applyErr error) v1alpha1.WidgetStatus {
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
	setProgress(&status.Conditions, progress(desired, deploy, applied, applyErr), w.Generation)
	return status
}

// progressKind says where a Widget stands on the way to its desired state.
type progressKind int

const (
	done progressKind = iota
	reconciling
	stalled
)

// progressState is a Widget's progress with the reason and message of its
// Reconciling or Stalled condition.
type progressState struct {
	kind            progressKind
	reason, message string
}

// progress judges, from the Deployment and the outcome of writing it, whether
// the Widget is at its desired state (desired replicas, all updated and
// available, nothing else left), on its way there, or stuck.
func progress(desired int32, deploy *appsv1.Deployment, applied bool, applyErr error) progressState {
	switch {
	case applyErr != nil && retryable(applyErr):
		return progressState{reconciling, v1alpha1.WidgetDeploymentRetryingReason,
			v1alpha1.TruncateMessage(fmt.Sprintf("cannot write Deployment yet, retrying: %v", applyErr))}
	case applyErr != nil:
		return progressState{stalled, v1alpha1.WidgetDeploymentFailedReason,
			v1alpha1.TruncateMessage(fmt.Sprintf("cannot write Deployment: %v", applyErr))}
	case applied || deploy == nil || deploy.Status.ObservedGeneration < deploy.Generation:
		// One message for both: the reconcile that follows the write (on its
		// watch event) then has nothing new to write.
		return progressState{reconciling, v1alpha1.WidgetDeploymentPendingReason, deploymentPendingMessage}
	}
	for _, c := range deploy.Status.Conditions {
		switch {
		case !stallsRollout(c):
		case c.Type == appsv1.DeploymentProgressing:
			return progressState{stalled, v1alpha1.WidgetDeploymentFailedReason,
				v1alpha1.TruncateMessage("the Deployment's rollout exceeded its progress deadline: " + c.Message)}
		default:
			return progressState{stalled, v1alpha1.WidgetDeploymentFailedReason,
				v1alpha1.TruncateMessage(fmt.Sprintf("the Deployment cannot create pods (%s): %s", c.Reason, c.Message))}
		}
	}
	s := deploy.Status
	switch {
	case s.UpdatedReplicas < desired:
		return progressState{reconciling, v1alpha1.WidgetRollingOutReason, fmt.Sprintf("%d/%d replicas updated", s.UpdatedReplicas, desired)}
	case s.Replicas > desired:
		return progressState{reconciling, v1alpha1.WidgetRollingOutReason, fmt.Sprintf("%d old replicas terminating", s.Replicas-desired)}
	case s.AvailableReplicas != desired:
		return progressState{reconciling, v1alpha1.WidgetRollingOutReason, fmt.Sprintf("%d/%d replicas available", s.AvailableReplicas, desired)}
	}
	return progressState{kind: done}
}

// retryable tells whether a failed write of the Deployment may succeed when
// retried as it is: the member timed out, throttled or failed, or the
// connection did. What the member refuses (forbidden, invalid, unauthorized,
// too large) needs a change first.
func retryable(err error) bool {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err),
		apierrors.IsUnauthorized(err), apierrors.IsRequestEntityTooLargeError(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsNotFound(err):
		return false
	}
	return true
}

// setProgress sets the Reconciling and Stalled conditions for p: at most one
// of them True, both removed once the Widget is done.
func setProgress(conditions *[]metav1.Condition, p progressState, generation int64) {
	set := func(condType string) {
		meta.SetStatusCondition(conditions, metav1.Condition{Type: condType, Status: metav1.ConditionTrue,
			Reason: p.reason, Message: p.message, ObservedGeneration: generation})
	}
	switch p.kind {
	case reconciling:
		set(v1alpha1.WidgetReconciling)
		meta.RemoveStatusCondition(conditions, v1alpha1.WidgetStalled)
	case stalled:
		set(v1alpha1.WidgetStalled)
		meta.RemoveStatusCondition(conditions, v1alpha1.WidgetReconciling)
	default:
		meta.RemoveStatusCondition(conditions, v1alpha1.WidgetReconciling)
		meta.RemoveStatusCondition(conditions, v1alpha1.WidgetStalled)
	}
}
