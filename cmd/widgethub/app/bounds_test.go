package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/internal/hubtest"
)

const boundsNS = "bounds"

// boundsMember registers alpha, the member of the bounds tests, and creates
// their namespace in it.
func boundsMember(t *testing.T) *fleet.ControlPlane {
	t.Helper()
	alpha := testFleet.Member("alpha")
	hubtest.Register(t, "alpha", alpha)
	hubtest.EnsureNamespace(t, alpha, boundsNS)
	t.Cleanup(func() { deleteWidgetsAndDeployments(t, alpha) })
	return alpha
}

// boundedWidget is a Widget of the bounds tests; edit sets its spec.
func boundedWidget(name string, edit func(*v1alpha1.WidgetSpec)) *v1alpha1.Widget {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: boundsNS, Name: name}}
	if edit != nil {
		edit(&w.Spec)
	}
	return w
}

// expectRefused fails t unless creating w in cp is refused as Invalid with
// an error that contains each of words.
func expectRefused(t *testing.T, cp *fleet.ControlPlane, w *v1alpha1.Widget, words ...string) {
	t.Helper()
	err := cp.Client.Create(context.Background(), w)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("creating Widget %q: got %v, want an Invalid error", w.Name, err)
	}
	t.Logf("refused: %v", err)
	for _, word := range words {
		if !strings.Contains(err.Error(), word) {
			t.Errorf("creating Widget %q: error %q does not say %q", w.Name, err, word)
		}
	}
}

// expectReconciled waits until the Widget key has a Deployment with replicas
// of image and a Ready condition for its current generation.
func expectReconciled(t *testing.T, cp *fleet.ControlPlane, key types.NamespacedName, replicas int32, image string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		w := hubtest.Widget(g, cp, key)
		d := hubtest.Deployment(g, cp, key)
		g.Expect(d.Spec.Replicas).To(Equal(ptr.To(replicas)))
		g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
		g.Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", key.Name))
		g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))
		ready := hubtest.ReadyCondition(w)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.ObservedGeneration).To(Equal(w.Generation))
		g.Expect(ready.Reason).To(Equal(v1alpha1.WidgetProgressingReason), "message: %s", ready.Message)
	}, hubtest.Within, hubtest.Poll).Should(Succeed(), "Widget %s", key)
}

func TestWidgetNameLongerThanALabelValueIsRefused(t *testing.T) {
	alpha := boundsMember(t)

	expectRefused(t, alpha, boundedWidget(strings.Repeat("n", v1alpha1.MaxWidgetNameLength+1), nil),
		"metadata.name must be at most 63 characters", "app.kubernetes.io/instance")

	// The longest name is reconciled: it fits the instance label.
	longest := strings.Repeat("n", v1alpha1.MaxWidgetNameLength)
	if err := alpha.Client.Create(context.Background(), boundedWidget(longest, nil)); err != nil {
		t.Fatalf("creating a Widget with a %d-character name: %v", len(longest), err)
	}
	expectReconciled(t, alpha, types.NamespacedName{Namespace: boundsNS, Name: longest}, 1, v1alpha1.DefaultWidgetImage)
}

func TestWidgetReplicasAreBounded(t *testing.T) {
	g := NewWithT(t)
	alpha := boundsMember(t)
	ctx := context.Background()

	expectRefused(t, alpha, boundedWidget("too-many", func(s *v1alpha1.WidgetSpec) {
		s.Replicas = ptr.To(int32(v1alpha1.MaxWidgetReplicas + 1))
	}), "spec.replicas", "1000")

	key := types.NamespacedName{Namespace: boundsNS, Name: "most"}
	most := boundedWidget(key.Name, func(s *v1alpha1.WidgetSpec) { s.Replicas = ptr.To(int32(v1alpha1.MaxWidgetReplicas)) })
	g.Expect(alpha.Client.Create(ctx, most)).To(Succeed())
	expectReconciled(t, alpha, key, v1alpha1.MaxWidgetReplicas, v1alpha1.DefaultWidgetImage)

	// Neither an update nor the scale subresource gets past the maximum.
	over := hubtest.Widget(g, alpha, key)
	over.Spec.Replicas = ptr.To(int32(v1alpha1.MaxWidgetReplicas + 1))
	if err := alpha.Client.Update(ctx, over); !apierrors.IsInvalid(err) {
		t.Errorf("updating spec.replicas to %d: got %v, want an Invalid error", v1alpha1.MaxWidgetReplicas+1, err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: v1alpha1.MaxWidgetReplicas + 1}}
	if err := alpha.Client.SubResource("scale").Update(ctx, hubtest.Widget(g, alpha, key), client.WithSubResourceBody(scale)); !apierrors.IsInvalid(err) {
		t.Errorf("scaling to %d: got %v, want an Invalid error", v1alpha1.MaxWidgetReplicas+1, err)
	}
	g.Expect(hubtest.Widget(g, alpha, key).Spec.Replicas).To(Equal(ptr.To(int32(v1alpha1.MaxWidgetReplicas))))
}

func TestWidgetImageIsBounded(t *testing.T) {
	alpha := boundsMember(t)

	// An image of MaxWidgetImageLength characters, a plausible reference.
	image := func(length int) string {
		const prefix, suffix = "registry.example/", ":v1"
		return prefix + strings.Repeat("a", length-len(prefix)-len(suffix)) + suffix
	}
	expectRefused(t, alpha, boundedWidget("image-too-long", func(s *v1alpha1.WidgetSpec) {
		s.Image = image(v1alpha1.MaxWidgetImageLength + 1)
	}), "spec.image", "1024")
	// The Deployment API refuses an image with whitespace around it; the
	// Widget API refuses it first, with whitespace anywhere.
	for _, img := range []string{" registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10\n", "registry.k8s.io/pause 3.10"} {
		expectRefused(t, alpha, boundedWidget("image-with-space", func(s *v1alpha1.WidgetSpec) { s.Image = img }),
			"spec.image must not contain whitespace")
	}

	key := types.NamespacedName{Namespace: boundsNS, Name: "longest-image"}
	longest := image(v1alpha1.MaxWidgetImageLength)
	if err := alpha.Client.Create(context.Background(), boundedWidget(key.Name, func(s *v1alpha1.WidgetSpec) { s.Image = longest })); err != nil {
		t.Fatalf("creating a Widget with a %d-character image: %v", len(longest), err)
	}
	expectReconciled(t, alpha, key, 1, longest)
}

// A Widget whose Deployment the member refuses says why in Ready and gets
// its Deployment once the cause is gone.
func TestRefusedDeploymentIsReported(t *testing.T) {
	g := NewWithT(t)
	alpha := boundsMember(t)
	ctx := context.Background()

	// Someone else's Deployment has the Widget's name and another selector,
	// which is immutable: the member refuses widgethub's apply.
	key := types.NamespacedName{Namespace: boundsNS, Name: "taken"}
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "someone-else"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "someone-else"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: v1alpha1.DefaultWidgetImage}}},
			},
		},
	}
	g.Expect(alpha.Client.Create(ctx, foreign)).To(Succeed())
	g.Expect(alpha.Client.Create(ctx, boundedWidget(key.Name, nil))).To(Succeed())
	g.Eventually(func(g Gomega) {
		w := hubtest.Widget(g, alpha, key)
		ready := hubtest.ReadyCondition(w)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(v1alpha1.WidgetDeploymentFailedReason))
		g.Expect(ready.Message).To(ContainSubstring("cannot write Deployment"))
		g.Expect(ready.Message).To(ContainSubstring("spec.selector"))
		g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))
	}, hubtest.Within, hubtest.Poll).Should(Succeed())

	// The failed write is retried with backoff: once the other Deployment is
	// gone the Widget gets its own. The backoff after a few seconds of
	// failures is seconds long, hence the longer bound.
	g.Expect(alpha.Client.Delete(ctx, foreign, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := hubtest.Deployment(g, alpha, key)
		g.Expect(metav1.GetControllerOf(d)).NotTo(BeNil())
		ready := hubtest.ReadyCondition(hubtest.Widget(g, alpha, key))
		g.Expect(ready.Reason).To(Equal(v1alpha1.WidgetProgressingReason), "message: %s", ready.Message)
	}, 2*time.Minute, hubtest.Poll).Should(Succeed())
}
