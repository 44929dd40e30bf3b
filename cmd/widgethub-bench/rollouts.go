package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// rolloutTracker records when the Deployments of one namespace of a member
// are seen with each spec.replicas: the middle of a quiet change, between
// the bench's patch of the Widget and the Widget's status.
type rolloutTracker struct {
	*watch

	mu sync.Mutex
	// seen holds, per Deployment name, every change of spec.replicas in the
	// order seen.
	seen map[string][]replicasSeen
}

type replicasSeen struct {
	replicas int32
	at       time.Time
}

// newRolloutTracker starts watching the Deployments of namespace at cfg and
// returns once the initial list is recorded.
func newRolloutTracker(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (*rolloutTracker, error) {
	t := &rolloutTracker{seen: map[string][]replicasSeen{}}
	// A watch that fails leaves later changes without a middle, which the
	// split counts (n of all).
	w, err := startWatch(ctx, cfg, scheme, namespace, &appsv1.Deployment{}, t.record, func(error) {})
	if err != nil {
		return nil, fmt.Errorf("rollout tracker: %w", err)
	}
	t.watch = w
	return t, nil
}

func (t *rolloutTracker) record(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || d.Spec.Replicas == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := t.seen[d.Name]
	if n := len(seen); n > 0 && seen[n-1].replicas == *d.Spec.Replicas {
		return
	}
	t.seen[d.Name] = append(seen, replicasSeen{replicas: *d.Spec.Replicas, at: now})
}

// seenAt is the first time at or after since that the Deployment name was
// seen changed to replicas.
func (t *rolloutTracker) seenAt(name string, replicas int32, since time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.seen[name] {
		if s.replicas == replicas && !s.at.Before(since) {
			return s.at, true
		}
	}
	return time.Time{}, false
}
