package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// tracker records when the Widgets of one member are reconciled.
type tracker struct {
	*watch

	mu sync.Mutex
	// changed is closed and replaced whenever a new observation is recorded.
	changed chan struct{}
	widgets map[types.NamespacedName]*history
	// firstReconciled lists, per namespace, the times Widgets were first seen
	// reconciled, in the order they were seen.
	firstReconciled map[string][]time.Time
	err             error
}

// history is what a tracker saw of one Widget.
type history struct {
	// seen holds the first time each observedGeneration was seen, in increasing generation.
	seen []observation
}

type observation struct {
	generation int64
	at         time.Time
}

// newTracker starts watching the Widgets of the API server at cfg, in
// namespace only when it is not empty, and returns once the initial list is
// recorded. Widgets already reconciled count as reconciled at that moment.
func newTracker(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (*tracker, error) {
	t := &tracker{
		changed:         make(chan struct{}),
		widgets:         map[types.NamespacedName]*history{},
		firstReconciled: map[string][]time.Time{},
	}
	w, err := startWatch(ctx, cfg, scheme, namespace, &v1alpha1.Widget{}, t.record, func(err error) {
		t.mu.Lock()
		t.err = err
		t.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("tracker: %w", err)
	}
	t.watch = w
	return t, nil
}

// watch is an informer of the bench's, on one API server.
type watch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startWatch starts an informer of obj's kind at cfg, in namespace only when
// it is not empty, that passes every object added or updated to record, and
// returns once the initial list is recorded. failed gets the informer's error
// when it ends on one.
func startWatch(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string, obj client.Object, record func(any), failed func(error)) (*watch, error) {
	opts := cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(rest.CopyConfig(cfg), opts)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	informer, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("informer: %w", err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		return nil, fmt.Errorf("handler: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		if err := c.Start(ctx); err != nil {
			failed(err)
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		w.stop()
		return nil, fmt.Errorf("%s: cache did not sync", cfg.Host)
	}
	return w, nil
}

// stop stops the informer and waits for it to end.
func (w *watch) stop() {
	w.cancel()
	<-w.done
}

func (t *tracker) record(obj any) {
	w, ok := obj.(*v1alpha1.Widget)
	if !ok || w.Status.ObservedGeneration == 0 {
		return
	}
	now := time.Now()
	key := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.widgets[key]
	if h == nil {
		h = &history{}
		t.widgets[key] = h
	}
	if n := len(h.seen); n > 0 && h.seen[n-1].generation >= w.Status.ObservedGeneration {
		return
	}
	if len(h.seen) == 0 {
		t.firstReconciled[w.Namespace] = append(t.firstReconciled[w.Namespace], now)
	}
	h.seen = append(h.seen, observation{generation: w.Status.ObservedGeneration, at: now})
	close(t.changed)
	t.changed = make(chan struct{})
}

// reconciledAt returns the first time the Widget key was seen reconciled at
// generation or later.
func (t *tracker) reconciledAt(key types.NamespacedName, generation int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.widgets[key]; h != nil {
		for _, o := range h.seen {
			if o.generation >= generation {
				return o.at, true
			}
		}
	}
	return time.Time{}, false
}

// reconciled is how many Widgets of namespace have been seen reconciled.
func (t *tracker) reconciled(namespace string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.firstReconciled[namespace])
}

// reconciledBy is how many Widgets of namespace had been seen reconciled at
// time at.
func (t *tracker) reconciledBy(namespace string, at time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, seen := range t.firstReconciled[namespace] {
		if !seen.After(at) {
			n++
		}
	}
	return n
}

// waitReconciled waits until n Widgets of namespace have been seen reconciled
// and returns the time the n-th was seen. It returns the context's error, and
// how many were seen, when ctx ends first.
func (t *tracker) waitReconciled(ctx context.Context, namespace string, n int) (time.Time, error) {
	for {
		t.mu.Lock()
		times, changed, err := t.firstReconciled[namespace], t.changed, t.err
		t.mu.Unlock()
		if len(times) >= n {
			return times[n-1], nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("tracker stopped: %w", err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d Widgets in %q reconciled: %w", len(times), n, namespace, ctx.Err())
		}
	}
}

// waitFor waits until the Widget key is seen reconciled at generation or later.
func (t *tracker) waitFor(ctx context.Context, key types.NamespacedName, generation int64) (time.Time, error) {
	for {
		t.mu.Lock()
		changed := t.changed
		t.mu.Unlock()
		if at, ok := t.reconciledAt(key, generation); ok {
			return at, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("widget %s generation %d not reconciled: %w", key, generation, ctx.Err())
		}
	}
}
