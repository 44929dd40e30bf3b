package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
)

// newClient returns a direct client for cfg without client-side rate
// limiting, so that load generators are limited by the API server only.
func newClient(cfg *rest.Config, scheme *runtime.Scheme) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.RateLimiter = nil
	return client.New(cfg, client.Options{Scheme: scheme})
}

// setReplicas merge-patches the Widget key's spec.replicas and returns the
// Widget's new generation.
func setReplicas(ctx context.Context, c client.Client, key types.NamespacedName, replicas int32) (int64, error) {
	w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if err := c.Patch(ctx, w, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return 0, fmt.Errorf("patch widget %s: %w", key, err)
	}
	return w.Generation, nil
}

// patchCeiling measures the API server's write ceiling: writers goroutines
// each merge-patch the status of a Widget of their own in namespace, one
// request after another, for d. It returns the patches per second.
func patchCeiling(ctx context.Context, c client.Client, namespace string, writers int, d time.Duration) (float64, error) {
	clients := []client.Client{c}
	prefix, err := createPatchTargets(ctx, clients, namespace, writers)
	if err != nil {
		return 0, err
	}
	return patchStatuses(ctx, clients, namespace, prefix, writers, d)
}

// createPatchTargets creates, through each of clients, the Widgets that
// patchStatuses with writers writers patches, and returns their prefix.
func createPatchTargets(ctx context.Context, clients []client.Client, namespace string, writers int) (string, error) {
	prefix := fmt.Sprintf("ceiling-%d", writers)
	for _, c := range clients {
		if err := fleet.CreateWidgets(ctx, c, namespace, prefix, writers, writers); err != nil {
			return "", err
		}
	}
	return prefix, nil
}

// patchStatuses is patchCeiling's load on Widgets createPatchTargets made,
// the i-th of writers writing through clients[i%len(clients)].
func patchStatuses(ctx context.Context, clients []client.Client, namespace, prefix string, writers int, d time.Duration) (float64, error) {
	var patches atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	err := fleet.Parallel(writers, writers, func(i int) error {
		c := clients[i%len(clients)]
		w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fleet.WidgetName(prefix, i)}}
		for n := 1; time.Now().Before(deadline); n++ {
			patch := fmt.Appendf(nil, `{"status":{"availableReplicas":%d}}`, n)
			if err := c.Status().Patch(ctx, w, client.RawPatch(types.MergePatchType, patch)); err != nil {
				return fmt.Errorf("patch widget status %s: %w", w.Name, err)
			}
			patches.Add(1)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(patches.Load()) / time.Since(start).Seconds(), nil
}

// deleteWidgetsOf deletes every Widget and Deployment in namespace of each
// of members, the members at once, waits until none is left, and logs how
// long that took.
func deleteWidgetsOf(ctx context.Context, members []member, namespace string) error {
	start := time.Now()
	err := fleet.Parallel(len(members), len(members), func(i int) error {
		return deleteWidgets(ctx, members[i].client, namespace)
	})
	logf("deleted the Widgets and Deployments in %s of %d member(s) in %s", namespace, len(members), formatDuration(time.Since(start)))
	return err
}

// createWidgetsOf creates n Widgets named prefix-i in namespace of each of
// members, the members at once, each with the bench's writers.
func (b *benchmark) createWidgetsOf(ctx context.Context, members []member, namespace, prefix string, n int) error {
	return fleet.Parallel(len(members), len(members), func(i int) error {
		return fleet.CreateWidgets(ctx, members[i].client, namespace, prefix, n, b.writers)
	})
}

// deleteWidgets deletes every Widget and Deployment in namespace and waits
// until none is left. (envtest runs no garbage collector.) The Widgets go
// first: a manager still reconciling one would create its Deployment again.
func deleteWidgets(ctx context.Context, c client.Client, namespace string) error {
	for _, obj := range []client.Object{&v1alpha1.Widget{}, &appsv1.Deployment{}} {
		if err := c.DeleteAllOf(ctx, obj, client.InNamespace(namespace)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %T in %s: %w", obj, namespace, err)
		}
	}
	for {
		widgets, deploys := &v1alpha1.WidgetList{}, &appsv1.DeploymentList{}
		if err := c.List(ctx, widgets, client.InNamespace(namespace), client.Limit(1)); err != nil {
			return fmt.Errorf("list widgets in %s: %w", namespace, err)
		}
		if err := c.List(ctx, deploys, client.InNamespace(namespace), client.Limit(1)); err != nil {
			return fmt.Errorf("list deployments in %s: %w", namespace, err)
		}
		if len(widgets.Items) == 0 && len(deploys.Items) == 0 {
			return nil
		}
		if len(widgets.Items) == 0 {
			// A reconcile that was still running made one again: delete
			// again, now that no Widget is left to make it.
			if err := c.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(namespace)); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete Deployments in %s: %w", namespace, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("widgets in %s not deleted: %w", namespace, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
