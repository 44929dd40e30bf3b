//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// createWidget creates the namespace (when missing) and a Widget of replicas
// pause pods in the member.
func createWidget(t *testing.T, m *kube, ns, name string, replicas int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.IgnoreAlreadyExists(m.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
		t.Fatalf("namespace %s in %s: %v", ns, m.kind, err)
	}
	w := &v1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.WidgetSpec{Replicas: ptr.To(replicas)},
	}
	if err := m.Create(ctx, w); err != nil {
		t.Fatalf("create Widget %s/%s in %s: %v", ns, name, m.kind, err)
	}
}

// setReplicas changes the Widget's spec.replicas in the member.
func setReplicas(t *testing.T, m *kube, ns, name string, replicas int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := patchReplicas(ctx, m, ns, name, replicas); err != nil {
		t.Fatal(err)
	}
}

func patchReplicas(ctx context.Context, m *kube, ns, name string, replicas int32) error {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	if err := m.Patch(ctx, w, patch); err != nil {
		return fmt.Errorf("set replicas of Widget %s/%s in %s: %w", ns, name, m.kind, err)
	}
	return nil
}

// waitWidget waits until the member's Widget is reconciled at replicas: its
// Deployment asks for replicas pods, they Run, and the Widget reports them
// available with Ready=True for its current generation.
func waitWidget(t *testing.T, m *kube, ns, name string, replicas int32) {
	t.Helper()
	start := time.Now()
	eventually(t, widgetTimeout, fmt.Sprintf("Widget %s/%s in %s at %d replicas", ns, name, m.kind, replicas),
		func(ctx context.Context) error { return widgetAt(ctx, m, ns, name, replicas) })
	logf("Widget %s/%s in %s: %d replicas Running, Ready=True after %s", ns, name, m.kind, replicas, time.Since(start).Round(time.Second))
}

func widgetAt(ctx context.Context, m *kube, ns, name string, replicas int32) error {
	w := &v1alpha1.Widget{}
	if err := m.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
		return err
	}
	if got := ptr.Deref(w.Spec.Replicas, -1); got != replicas {
		return fmt.Errorf("Widget spec.replicas is %d, want %d", got, replicas)
	}
	d := &appsv1.Deployment{}
	if err := m.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return fmt.Errorf("Deployment: %w", err)
	}
	if owner := metav1.GetControllerOf(d); owner == nil || owner.UID != w.UID {
		return fmt.Errorf("Deployment is not controlled by the Widget (owner %v)", owner)
	}
	if got := ptr.Deref(d.Spec.Replicas, -1); got != replicas {
		return fmt.Errorf("Deployment spec.replicas is %d, want %d", got, replicas)
	}
	pods := &corev1.PodList{}
	if err := m.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
		return err
	}
	var running int32
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	if running != replicas {
		return fmt.Errorf("%d of %d pods Running", running, replicas)
	}
	if w.Status.ObservedGeneration != w.Generation {
		return fmt.Errorf("Widget status is of generation %d, want %d", w.Status.ObservedGeneration, w.Generation)
	}
	if w.Status.AvailableReplicas != replicas {
		return fmt.Errorf("Widget status.availableReplicas is %d, want %d", w.Status.AvailableReplicas, replicas)
	}
	c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WidgetReady)
	if c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("Widget not Ready: %v", c)
	}
	return nil
}

// deploymentReplicas is the member's Deployment's spec.replicas.
func deploymentReplicas(ctx context.Context, m *kube, ns, name string) (int32, error) {
	d := &appsv1.Deployment{}
	if err := m.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return 0, err
	}
	return ptr.Deref(d.Spec.Replicas, -1), nil
}
