package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/widgethub/widgethub/internal/fleet"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// quietPrefix names the Widgets of the quiet member: fleet.WidgetName(quietPrefix, i).
const quietPrefix = "quiet"

// flood describes a fairness measurement: one member is flooded with new
// Widgets while single Widgets of a quiet member change one after another.
// Both members must be engaged and their trackers running.
type flood struct {
	// flooded and quiet are direct clients of the two members.
	flooded, quiet client.Client
	// floodTracker and quietTracker watch the two members.
	floodTracker, quietTracker *tracker
	// quietRollouts, when set, watches the quiet member's Deployments.
	quietRollouts *rolloutTracker
	// floodNamespace receives widgets new Widgets from writers writers.
	floodNamespace string
	widgets        int
	writers        int
	// quietNamespace holds quietWidgets reconciled Widgets named
	// fleet.WidgetName(quietPrefix, i); one of them, in turn, changes every changeEvery
	// until the flood is reconciled.
	quietNamespace string
	quietWidgets   int
	changeEvery    time.Duration
	// firstChange numbers the first change; set it to the changes of an
	// earlier baseline so that every change changes the spec.
	firstChange int
	// window bounds the measurement from the flood's start: the flood that is
	// not reconciled by then, and changes not reconciled by then, are reported
	// as unfinished. Changes stop at half the window, so that an unfinished
	// change waited at least half the window.
	window time.Duration
	// writes, when set, counts the controller's writes to the flooded member.
	writes *writeCounter
}

// floodResult is what a flood measured.
type floodResult struct {
	// start is when the first Widget of the flood was sent; created when the
	// last one was created.
	start, created time.Time
	// drained is when the last Widget of the flood was seen reconciled; zero
	// when the window closed first.
	drained time.Time
	// end is drained, or the end of the window.
	end time.Time
	// reconciled is how many Widgets of the flood were reconciled by end.
	reconciled int
	// writes are the controller's writes to the flooded member from start
	// to end, and from created to end, when flood.writes is set.
	writes, writesAfterCreated writeCounts
	// changes are the quiet member's changes.
	changes []change
}

// change is one change of a quiet Widget.
type change struct {
	key        types.NamespacedName
	generation int64
	replicas   int32
	// at is when the patch was sent, patched when its response arrived.
	at, patched time.Time
	// deployed is when the Widget's Deployment was seen with the new
	// replicas; zero when it was not, or not watched.
	deployed time.Time
	// reconciled is when the change was seen reconciled; zero when it was
	// not by the end of the window.
	reconciled time.Time
	// floodLeft is how many Widgets of the flood were not reconciled yet
	// when the change was.
	floodLeft int
}

// latency is how long the change took, or a lower bound of it, measured at
// windowEnd, when it was not reconciled.
func (c change) latency(windowEnd time.Time) sample {
	if c.reconciled.IsZero() {
		return sample{value: windowEnd.Sub(c.at), unfinished: true}
	}
	return sample{value: c.reconciled.Sub(c.at)}
}

// latencies are the samples of every change.
func (r *floodResult) latencies(windowEnd time.Time) []sample {
	s := make([]sample, len(r.changes))
	for i, c := range r.changes {
		s[i] = c.latency(windowEnd)
	}
	return s
}

// drainTime is how long the flood took from its first create to its last
// reconcile, or to the end of the window.
func (r *floodResult) drainTime() time.Duration { return r.end.Sub(r.start) }

// run floods the flooded member and changes quiet Widgets until the flood is
// reconciled or the window closes, then waits, within the window, for the
// changes to be reconciled.
func (f flood) run(ctx context.Context) (*floodResult, error) {
	var writesAtStart, writesAtCreated writeCounts
	if err := f.countWrites(ctx, &writesAtStart); err != nil {
		return nil, err
	}
	res := &floodResult{start: time.Now()}
	windowCtx, cancelWindow := context.WithDeadline(ctx, res.start.Add(f.window))
	defer cancelWindow()

	created := make(chan error, 1)
	go func() {
		err := fleet.CreateWidgets(windowCtx, f.flooded, f.floodNamespace, "flood", f.widgets, f.writers)
		res.created = time.Now()
		if err == nil {
			err = f.countWrites(windowCtx, &writesAtCreated)
		}
		created <- err
	}()

	drained := make(chan struct{})
	changes := make(chan error, 1)
	changeCtx, cancelChanges := context.WithDeadline(windowCtx, res.start.Add(f.window/2))
	defer cancelChanges()
	go func() { changes <- f.change(changeCtx, drained, res) }()

	drainedAt, drainErr := f.floodTracker.waitReconciled(windowCtx, f.floodNamespace, f.widgets)
	close(drained)
	var writesAtEnd writeCounts
	if err := f.countWrites(ctx, &writesAtEnd); err != nil {
		return nil, err
	}
	if err := <-created; err != nil && ctx.Err() == nil && windowCtx.Err() == nil {
		return nil, fmt.Errorf("flood: %w", err)
	}
	res.writes, res.writesAfterCreated = writesAtEnd.sub(writesAtStart), writesAtEnd.sub(writesAtCreated)
	if err := <-changes; err != nil {
		return nil, err
	}
	switch {
	case drainErr == nil:
		res.drained, res.end = drainedAt, drainedAt
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		res.end = res.start.Add(f.window)
	}
	res.reconciled = f.floodTracker.reconciledBy(f.floodNamespace, res.end)

	for i := range res.changes {
		c := &res.changes[i]
		at, err := f.quietTracker.waitFor(windowCtx, c.key, c.generation)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break // the window closed: this and later changes are unfinished
		}
		c.reconciled = at
		c.floodLeft = f.widgets - f.floodTracker.reconciledBy(f.floodNamespace, at)
	}
	if f.quietRollouts != nil {
		for i := range res.changes {
			c := &res.changes[i]
			c.deployed, _ = f.quietRollouts.seenAt(c.key.Name, c.replicas, c.at)
		}
	}
	return res, nil
}

// countWrites stores the count of writes in n when f.writes is set.
func (f flood) countWrites(ctx context.Context, n *writeCounts) error {
	if f.writes == nil {
		return nil
	}
	count, err := f.writes.count(ctx)
	*n = count
	return err
}

// change patches the quiet Widgets in turn, one every changeEvery, until
// drained is closed or ctx ends.
func (f flood) change(ctx context.Context, drained <-chan struct{}, res *floodResult) error {
	tick := time.NewTicker(f.changeEvery)
	defer tick.Stop()
	for i := f.firstChange; ; i++ {
		select {
		case <-drained:
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		key := types.NamespacedName{Namespace: f.quietNamespace, Name: fleet.WidgetName(quietPrefix, i%f.quietWidgets)}
		at := time.Now()
		// Alternate 1 and 2 replicas so that every patch changes the spec.
		replicas := int32(2 - (i/f.quietWidgets)%2)
		gen, err := setReplicas(ctx, f.quiet, key, replicas)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil // the window closed during the patch
			}
			return fmt.Errorf("change quiet widget: %w", err)
		}
		res.changes = append(res.changes, change{key: key, generation: gen, replicas: replicas, at: at, patched: time.Now()})
	}
}

// baseline makes n changes of quiet Widgets, one every changeEvery, with no
// flood, and returns how long each took to be seen reconciled: the latency the
// flood's changes compare with. Changes not reconciled within window fail it.
func (f flood) baseline(ctx context.Context, n int) ([]sample, error) {
	res := &floodResult{}
	changeCtx, cancel := context.WithTimeout(ctx, time.Duration(n)*f.changeEvery+f.changeEvery/2)
	err := f.change(changeCtx, nil, res)
	cancel()
	if err != nil {
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, f.window)
	defer cancel()
	for i := range res.changes {
		c := &res.changes[i]
		if c.reconciled, err = f.quietTracker.waitFor(waitCtx, c.key, c.generation); err != nil {
			return nil, err
		}
	}
	return res.latencies(time.Time{}), nil
}
