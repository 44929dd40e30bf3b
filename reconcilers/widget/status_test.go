package widget

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

func TestObservedStatus(t *testing.T) {
	withAvailable := func(n int32) *appsv1.Deployment {
		return &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: n}}
	}
	tests := []struct {
		name       string
		replicas   *int32
		deploy     *appsv1.Deployment
		applyErr   error
		wantStatus metav1.ConditionStatus
		wantReason string
		wantAvail  int32
		wantMsg    string
	}{
		{"no deployment yet", ptr.To[int32](2), nil, nil, metav1.ConditionFalse, v1alpha1.WidgetProgressingReason, 0, "0/2 replicas available"},
		{"partly available", ptr.To[int32](3), withAvailable(1), nil, metav1.ConditionFalse, v1alpha1.WidgetProgressingReason, 1, "1/3 replicas available"},
		{"all available", ptr.To[int32](3), withAvailable(3), nil, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, 3, "3/3 replicas available"},
		{"scaled to zero", ptr.To[int32](0), withAvailable(0), nil, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, 0, "0/0 replicas available"},
		{"scaling down", ptr.To[int32](1), withAvailable(2), nil, metav1.ConditionFalse, v1alpha1.WidgetProgressingReason, 2, "2/1 replicas available"},
		{"unset replicas default to one", nil, withAvailable(1), nil, metav1.ConditionTrue, v1alpha1.WidgetAvailableReason, 1, "1/1 replicas available"},
		{"apply failed", ptr.To[int32](1), withAvailable(1), errors.New("forbidden"), metav1.ConditionFalse, v1alpha1.WidgetDeploymentFailedReason, 1, "cannot write Deployment: forbidden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &v1alpha1.Widget{
				ObjectMeta: metav1.ObjectMeta{Name: "w", Generation: 7},
				Spec:       v1alpha1.WidgetSpec{Replicas: tc.replicas},
			}
			got := observedStatus(w, tc.deploy, tc.applyErr)
			ready := meta.FindStatusCondition(got.Conditions, v1alpha1.WidgetReady)
			if ready == nil {
				t.Fatal("no Ready condition")
			}
			if ready.Status != tc.wantStatus || ready.Reason != tc.wantReason || ready.Message != tc.wantMsg {
				t.Errorf("Ready = %s/%s %q, want %s/%s %q", ready.Status, ready.Reason, ready.Message, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
			if got.AvailableReplicas != tc.wantAvail || got.ObservedGeneration != 7 || ready.ObservedGeneration != 7 {
				t.Errorf("available %d generation %d/%d, want %d and 7", got.AvailableReplicas, got.ObservedGeneration, ready.ObservedGeneration, tc.wantAvail)
			}
			if got.Selector != "app.kubernetes.io/instance=w,app.kubernetes.io/name=widget" {
				t.Errorf("selector %q", got.Selector)
			}
		})
	}
}

func TestObservedStatusKeepsTransitionTime(t *testing.T) {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Generation: 1}, Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](1)}}
	first := observedStatus(w, &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}, nil)
	w.Status = first
	again := observedStatus(w, &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}, nil)
	if !meta.FindStatusCondition(again.Conditions, v1alpha1.WidgetReady).LastTransitionTime.Equal(
		&meta.FindStatusCondition(first.Conditions, v1alpha1.WidgetReady).LastTransitionTime) {
		t.Fatal("an unchanged condition got a new transition time: the status would be rewritten on every reconcile")
	}
}
