package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultWidgetImage is the container image a Widget runs when spec.image is empty.
const DefaultWidgetImage = "registry.k8s.io/pause:3.10"

// Bounds the API server enforces on a Widget (see the markers below).
const (
	// MaxWidgetNameLength is the longest Widget name: the name is the value
	// of the app.kubernetes.io/instance label of the Widget's Deployment and
	// pods, and a label value has at most 63 characters.
	MaxWidgetNameLength = 63
	// MaxWidgetReplicas is the largest spec.replicas.
	MaxWidgetReplicas = 1000
	// MaxWidgetImageLength is the longest spec.image.
	MaxWidgetImageLength = 1024
)

// Condition types and reasons of a Widget. Besides Ready, a Widget follows
// the kstatus conventions (sigs.k8s.io/cli-utils/pkg/kstatus): Reconciling is
// True while it is on its way to its desired state, Stalled is True when it
// cannot get there without a change, and both are absent once it is there.
const (
	// WidgetReady is True when every desired replica of the Widget is available.
	WidgetReady = "Ready"

	// WidgetAvailableReason: all desired replicas are available.
	WidgetAvailableReason = "Available"
	// WidgetProgressingReason: the Deployment has fewer available replicas than desired.
	WidgetProgressingReason = "Progressing"
	// WidgetDeploymentFailedReason: the Deployment could not be written
	// (Ready and Stalled), or cannot roll out: its progress deadline passed
	// or it cannot create pods (Stalled).
	WidgetDeploymentFailedReason = "DeploymentFailed"

	// WidgetReconciling is True while the Widget's Deployment is not yet at
	// the Widget's spec and is expected to get there without a change.
	WidgetReconciling = "Reconciling"
	// WidgetStalled is True while the Widget's Deployment cannot get to the
	// Widget's spec without a change (reason WidgetDeploymentFailedReason).
	WidgetStalled = "Stalled"

	// WidgetDeploymentPendingReason (Reconciling): the Deployment was just
	// written, or its controller has not yet observed its latest spec.
	WidgetDeploymentPendingReason = "DeploymentPending"
	// WidgetRollingOutReason (Reconciling): the Deployment has fewer updated
	// or available replicas than desired, or old ones still terminating.
	WidgetRollingOutReason = "RollingOut"
	// WidgetDeploymentRetryingReason (Reconciling): writing the Deployment
	// failed in a way a retry may fix (a timeout, 429, 5xx); it is retried
	// with backoff.
	WidgetDeploymentRetryingReason = "DeploymentRetrying"
)

// WidgetSpec is the desired state of a Widget.
type WidgetSpec struct {
	// Replicas is the number of pods the Widget's Deployment runs, from 0 to
	// 1000. The maximum catches a slip of the keyboard (10000 for 100) before
	// it floods a member's scheduler and quota: 1000 pods of one Deployment
	// is already several nodes' worth at Kubernetes' 110 pods per node, and a
	// workload larger than that belongs in several Widgets (or clusters).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image is the container image of the Widget's pods: at most 1024
	// characters, no whitespace. A reference's repository path has at most 255
	// characters, a tag 128 and a sha512 digest 135, so 1024 leaves room for
	// any registry host while keeping every Widget (and its Deployment and
	// Events) small. The Deployment API refuses an image with whitespace
	// around it; the Widget API refuses one with whitespace anywhere, which
	// no image reference has.
	// +kubebuilder:default="registry.k8s.io/pause:3.10"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:space:]]')",message="spec.image must not contain whitespace"
	// +optional
	Image string `json:"image,omitempty"`
}

// WidgetStatus is the observed state of a Widget, written by widgethub.
type WidgetStatus struct {
	// AvailableReplicas is the number of available pods of the Widget's Deployment.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`

	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Selector is the label selector of the Widget's pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// Conditions describe the Widget's state; see the Ready condition.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Widget is a replicated workload that widgethub runs in a member cluster as a Deployment.
// Its name has at most 63 characters: it is the app.kubernetes.io/instance
// label value of the Deployment and its pods.
//
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it is the value of the app.kubernetes.io/instance label of the Widget's Deployment and pods"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.availableReplicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec WidgetSpec `json:"spec,omitempty"`
	// +optional
	Status WidgetStatus `json:"status,omitempty"`
}

// DesiredReplicas is spec.replicas, or the API default of 1 when it is unset.
func (w *Widget) DesiredReplicas() int32 {
	if w.Spec.Replicas == nil {
		return 1
	}
	return *w.Spec.Replicas
}

// DesiredImage is spec.image, or DefaultWidgetImage when it is empty.
func (w *Widget) DesiredImage() string {
	if w.Spec.Image == "" {
		return DefaultWidgetImage
	}
	return w.Spec.Image
}

// WidgetList is a list of Widgets.
//
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Widget{}, &WidgetList{})
}
