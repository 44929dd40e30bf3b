package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultWidgetImage is the container image a Widget runs when spec.image is empty.
const DefaultWidgetImage = "registry.k8s.io/pause:3.10"

// Condition types and reasons of a Widget.
const (
	// WidgetReady is True when every desired replica of the Widget is available.
	WidgetReady = "Ready"

	// WidgetAvailableReason: all desired replicas are available.
	WidgetAvailableReason = "Available"
	// WidgetProgressingReason: the Deployment has fewer available replicas than desired.
	WidgetProgressingReason = "Progressing"
	// WidgetDeploymentFailedReason: the Deployment could not be written.
	WidgetDeploymentFailedReason = "DeploymentFailed"
)

// WidgetSpec is the desired state of a Widget.
type WidgetSpec struct {
	// Replicas is the number of pods the Widget's Deployment runs.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image is the container image of the Widget's pods.
	// +kubebuilder:default="registry.k8s.io/pause:3.10"
	// +kubebuilder:validation:MinLength=1
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
//
// +kubebuilder:object:root=true
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
