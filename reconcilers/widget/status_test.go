package widget

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

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
			got := observedStatus(w, tc.deploy, false, tc.applyErr)
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
	first := observedStatus(w, &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}, false, nil)
	w.Status = first
	again := observedStatus(w, &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}, false, nil)
	if !meta.FindStatusCondition(again.Conditions, v1alpha1.WidgetReady).LastTransitionTime.Equal(
		&meta.FindStatusCondition(first.Conditions, v1alpha1.WidgetReady).LastTransitionTime) {
		t.Fatal("an unchanged condition got a new transition time: the status would be rewritten on every reconcile")
	}
}

// rolledOut is a Deployment of generation 2 whose controller observed it and
// reports n replicas, all updated and available.
func rolledOut(n int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n},
	}
}

func withDeployment(d *appsv1.Deployment, edit func(*appsv1.Deployment)) *appsv1.Deployment {
	edit(d)
	return d
}

// kstatusOf is what the kstatus library (as Flux, kpt and Helm use it) makes
// of a Widget with status.
func kstatusOf(t *testing.T, w *v1alpha1.Widget) kstatus.Status {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

func TestProgressConditions(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		deploy   *appsv1.Deployment
		applied  bool
		applyErr error
		// wantType is the True one of Reconciling and Stalled; "" for neither.
		wantType, wantReason, wantMsg string
		wantReady                     metav1.ConditionStatus
		want                          kstatus.Status
	}{
		{"just created", 2, nil, true, nil,
			v1alpha1.WidgetReconciling, v1alpha1.WidgetDeploymentPendingReason, deploymentPendingMessage, metav1.ConditionFalse, kstatus.InProgressStatus},
		{"spec just written to a rolled out Deployment", 2, rolledOut(2), true, nil,
			v1alpha1.WidgetReconciling, v1alpha1.WidgetDeploymentPendingReason, "", metav1.ConditionTrue, kstatus.InProgressStatus},
		{"generation not observed by the Deployment controller", 2, withDeployment(rolledOut(2), func(d *appsv1.Deployment) { d.Generation = 3 }), false, nil,
			v1alpha1.WidgetReconciling, v1alpha1.WidgetDeploymentPendingReason, deploymentPendingMessage, metav1.ConditionTrue, kstatus.InProgressStatus},
		{"rolled out", 2, rolledOut(2), false, nil, "", "", "", metav1.ConditionTrue, kstatus.CurrentStatus},
		{"scaled to zero", 0, rolledOut(0), false, nil, "", "", "", metav1.ConditionTrue, kstatus.CurrentStatus},
		{"new image rolling out while every replica is available", 2, withDeployment(rolledOut(3), func(d *appsv1.Deployment) {
			d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 1, 2
		}), false, nil, v1alpha1.WidgetReconciling, v1alpha1.WidgetRollingOutReason, "1/2 replicas updated", metav1.ConditionTrue, kstatus.InProgressStatus},
		{"old replicas terminating", 2, withDeployment(rolledOut(2), func(d *appsv1.Deployment) { d.Status.Replicas = 3 }), false, nil,
			v1alpha1.WidgetReconciling, v1alpha1.WidgetRollingOutReason, "1 old replicas terminating", metav1.ConditionTrue, kstatus.InProgressStatus},
		{"scaling up", 3, withDeployment(rolledOut(3), func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 1 }), false, nil,
			v1alpha1.WidgetReconciling, v1alpha1.WidgetRollingOutReason, "1/3 replicas available", metav1.ConditionFalse, kstatus.InProgressStatus},
		{"progress deadline exceeded", 3, withDeployment(rolledOut(3), func(d *appsv1.Deployment) {
			d.Status.AvailableReplicas = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "w-1" has timed out progressing.`}}
		}), false, nil, v1alpha1.WidgetStalled, v1alpha1.WidgetDeploymentFailedReason,
			`the Deployment's rollout exceeded its progress deadline: ReplicaSet "w-1" has timed out progressing.`, metav1.ConditionFalse, kstatus.FailedStatus},
		{"progressing normally", 3, withDeployment(rolledOut(3), func(d *appsv1.Deployment) {
			d.Status.AvailableReplicas = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"}}
		}), false, nil, v1alpha1.WidgetReconciling, v1alpha1.WidgetRollingOutReason, "1/3 replicas available", metav1.ConditionFalse, kstatus.InProgressStatus},
		{"replica failure", 3, withDeployment(rolledOut(3), func(d *appsv1.Deployment) {
			d.Status.AvailableReplicas = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
				Reason: "FailedCreate", Message: "pods are forbidden: exceeded quota"}}
		}), false, nil, v1alpha1.WidgetStalled, v1alpha1.WidgetDeploymentFailedReason,
			"the Deployment cannot create pods (FailedCreate): pods are forbidden: exceeded quota", metav1.ConditionFalse, kstatus.FailedStatus},
		{"write forbidden", 1, rolledOut(1), false, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "w", errors.New("no")),
			v1alpha1.WidgetStalled, v1alpha1.WidgetDeploymentFailedReason, "", metav1.ConditionFalse, kstatus.FailedStatus},
		{"write invalid", 1, nil, false, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "w", nil),
			v1alpha1.WidgetStalled, v1alpha1.WidgetDeploymentFailedReason, "", metav1.ConditionFalse, kstatus.FailedStatus},
		{"write timed out", 1, rolledOut(1), false, apierrors.NewTimeoutError("slow", 1),
			v1alpha1.WidgetReconciling, v1alpha1.WidgetDeploymentRetryingReason, "", metav1.ConditionFalse, kstatus.InProgressStatus},
		{"write throttled", 1, rolledOut(1), false, apierrors.NewTooManyRequests("busy", 1),
			v1alpha1.WidgetReconciling, v1alpha1.WidgetDeploymentRetryingReason, "", metav1.ConditionFalse, kstatus.InProgressStatus},
		{"connection failed", 1, rolledOut(1), false, errors.New("dial tcp: connection refused"),
			v1alpha1.WidgetReconciling, v1alpha1.WidgetDeploymentRetryingReason, "cannot write Deployment yet, retrying: dial tcp: connection refused", metav1.ConditionFalse, kstatus.InProgressStatus},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &v1alpha1.Widget{
				ObjectMeta: metav1.ObjectMeta{Name: "w", Generation: 7},
				Spec:       v1alpha1.WidgetSpec{Replicas: ptr.To(tc.replicas)},
			}
			// Conditions of an earlier state never linger.
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.WidgetStalled, Status: metav1.ConditionTrue, Reason: "Old"})
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.WidgetReconciling, Status: metav1.ConditionTrue, Reason: "Old"})
			w.Status = observedStatus(w, tc.deploy, tc.applied, tc.applyErr)
			if got := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WidgetReady).Status; got != tc.wantReady {
				t.Errorf("Ready %s, want %s", got, tc.wantReady)
			}
			for _, condType := range []string{v1alpha1.WidgetReconciling, v1alpha1.WidgetStalled} {
				c := meta.FindStatusCondition(w.Status.Conditions, condType)
				if condType != tc.wantType {
					if c != nil {
						t.Errorf("%s = %+v, want it absent", condType, c)
					}
					continue
				}
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.wantReason || c.ObservedGeneration != 7 {
					t.Fatalf("%s = %+v, want True/%s at generation 7", condType, c, tc.wantReason)
				}
				if tc.wantMsg != "" && c.Message != tc.wantMsg {
					t.Errorf("%s message %q, want %q", condType, c.Message, tc.wantMsg)
				}
			}
			if got := kstatusOf(t, w); got != tc.want {
				t.Errorf("kstatus says %s, want %s", got, tc.want)
			}
		})
	}
}

// A new Widget's status is written once: the reconcile that follows the
// creation of its Deployment (not yet observed by its controller) computes
// the same status as the one that created it.
func TestNewWidgetStatusIsWrittenOnce(t *testing.T) {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Generation: 1}, Spec: v1alpha1.WidgetSpec{Replicas: ptr.To[int32](2)}}
	w.Status = observedStatus(w, nil, true, nil)
	created := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	if next := observedStatus(w, created, false, nil); !equality.Semantic.DeepEqual(next, w.Status) {
		t.Fatalf("the reconcile after the Deployment's creation would write\n%+v\nover\n%+v", next.Conditions, w.Status.Conditions)
	}
}
