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

// QuietPrefix names the Widgets of the quiet member: fleet.WidgetName(QuietPrefix, i).
const QuietPrefix = "quiet"

// Flood describes a fairness measurement: one member is flooded with new
// Widgets while single Widgets of a quiet member change one after another.
// Both members must be engaged and their Trackers running.
type Flood struct {
	// Flooded and Quiet are direct clients of the two members.
	Flooded, Quiet client.Client
	// FloodTracker and QuietTracker watch the two members.
	FloodTracker, QuietTracker *Tracker
	// FloodNamespace receives Widgets new Widgets from Writers writers.
	FloodNamespace string
	Widgets        int
	Writers        int
	// QuietNamespace holds QuietWidgets reconciled Widgets named
	// fleet.WidgetName(QuietPrefix, i); one of them, in turn, changes every ChangeEvery
	// until the flood is reconciled.
	QuietNamespace string
	QuietWidgets   int
	ChangeEvery    time.Duration
	// FirstChange numbers the first change; set it to the changes of an
	// earlier Baseline so that every change changes the spec.
	FirstChange int
	// Window bounds the measurement from the flood's start: the flood that is
	// not reconciled by then, and changes not reconciled by then, are reported
	// as unfinished. Changes stop at half the window, so that an unfinished
	// change waited at least half the window.
	Window time.Duration
	// Writes, when set, counts the controller's writes to the flooded member.
	Writes *WriteCounter
}

// FloodResult is what a Flood measured.
type FloodResult struct {
	// Start is when the first Widget of the flood was sent; Created when the
	// last one was created.
	Start, Created time.Time
	// Drained is when the last Widget of the flood was seen reconciled; zero
	// when the window closed first.
	Drained time.Time
	// End is Drained, or the end of the window.
	End time.Time
	// Reconciled is how many Widgets of the flood were reconciled by End.
	Reconciled int
	// Writes are the controller's writes to the flooded member from Start
	// to End, and from Created to End, when Flood.Writes is set.
	Writes, WritesAfterCreated Writes
	// Changes are the quiet member's changes.
	Changes []Change
}

// Change is one change of a quiet Widget.
type Change struct {
	Key        types.NamespacedName
	Generation int64
	// At is when the patch was sent, Patched when its response arrived.
	At, Patched time.Time
	// Reconciled is when the change was seen reconciled; zero when it was
	// not by the end of the window.
	Reconciled time.Time
	// FloodLeft is how many Widgets of the flood were not reconciled yet
	// when the change was.
	FloodLeft int
}

// Latency is how long the change took, or a lower bound of it, measured at
// windowEnd, when it was not reconciled.
func (c Change) Latency(windowEnd time.Time) Sample {
	if c.Reconciled.IsZero() {
		return Sample{Value: windowEnd.Sub(c.At), Unfinished: true}
	}
	return Sample{Value: c.Reconciled.Sub(c.At)}
}

// Latencies are the samples of every change.
func (r *FloodResult) Latencies(windowEnd time.Time) []Sample {
	s := make([]Sample, len(r.Changes))
	for i, c := range r.Changes {
		s[i] = c.Latency(windowEnd)
	}
	return s
}

// DrainTime is how long the flood took from its first create to its last
// reconcile, or to the end of the window.
func (r *FloodResult) DrainTime() time.Duration { return r.End.Sub(r.Start) }

// Run floods the flooded member and changes quiet Widgets until the flood is
// reconciled or the window closes, then waits, within the window, for the
// changes to be reconciled.
func (f Flood) Run(ctx context.Context) (*FloodResult, error) {
	var writesAtStart, writesAtCreated Writes
	if err := f.countWrites(ctx, &writesAtStart); err != nil {
		return nil, err
	}
	res := &FloodResult{Start: time.Now()}
	windowCtx, cancelWindow := context.WithDeadline(ctx, res.Start.Add(f.Window))
	defer cancelWindow()

	created := make(chan error, 1)
	go func() {
		err := fleet.CreateWidgets(windowCtx, f.Flooded, f.FloodNamespace, "flood", f.Widgets, f.Writers)
		res.Created = time.Now()
		if err == nil {
			err = f.countWrites(windowCtx, &writesAtCreated)
		}
		created <- err
	}()

	drained := make(chan struct{})
	changes := make(chan error, 1)
	changeCtx, cancelChanges := context.WithDeadline(windowCtx, res.Start.Add(f.Window/2))
	defer cancelChanges()
	go func() { changes <- f.change(changeCtx, drained, res) }()

	drainedAt, drainErr := f.FloodTracker.WaitReconciled(windowCtx, f.FloodNamespace, f.Widgets)
	close(drained)
	var writesAtEnd Writes
	if err := f.countWrites(ctx, &writesAtEnd); err != nil {
		return nil, err
	}
	if err := <-created; err != nil && ctx.Err() == nil && windowCtx.Err() == nil {
		return nil, fmt.Errorf("flood: %w", err)
	}
	res.Writes, res.WritesAfterCreated = writesAtEnd.Sub(writesAtStart), writesAtEnd.Sub(writesAtCreated)
	if err := <-changes; err != nil {
		return nil, err
	}
	switch {
	case drainErr == nil:
		res.Drained, res.End = drainedAt, drainedAt
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		res.End = res.Start.Add(f.Window)
	}
	res.Reconciled = f.FloodTracker.ReconciledBy(f.FloodNamespace, res.End)

	for i := range res.Changes {
		c := &res.Changes[i]
		at, err := f.QuietTracker.WaitFor(windowCtx, c.Key, c.Generation)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break // the window closed: this and later changes are unfinished
		}
		c.Reconciled = at
		c.FloodLeft = f.Widgets - f.FloodTracker.ReconciledBy(f.FloodNamespace, at)
	}
	return res, nil
}

// countWrites stores the count of writes in n when f.Writes is set.
func (f Flood) countWrites(ctx context.Context, n *Writes) error {
	if f.Writes == nil {
		return nil
	}
	count, err := f.Writes.Count(ctx)
	*n = count
	return err
}

// change patches the quiet Widgets in turn, one every ChangeEvery, until
// drained is closed or ctx ends.
func (f Flood) change(ctx context.Context, drained <-chan struct{}, res *FloodResult) error {
	tick := time.NewTicker(f.ChangeEvery)
	defer tick.Stop()
	for i := f.FirstChange; ; i++ {
		select {
		case <-drained:
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		key := types.NamespacedName{Namespace: f.QuietNamespace, Name: fleet.WidgetName(QuietPrefix, i%f.QuietWidgets)}
		at := time.Now()
		// Alternate 1 and 2 replicas so that every patch changes the spec.
		gen, err := SetReplicas(ctx, f.Quiet, key, int32(2-(i/f.QuietWidgets)%2))
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil // the window closed during the patch
			}
			return fmt.Errorf("change quiet widget: %w", err)
		}
		res.Changes = append(res.Changes, Change{Key: key, Generation: gen, At: at, Patched: time.Now()})
	}
}

// Baseline makes n changes of quiet Widgets, one every ChangeEvery, with no
// flood, and returns how long each took to be seen reconciled: the latency the
// flood's changes compare with. Changes not reconciled within Window fail it.
func (f Flood) Baseline(ctx context.Context, n int) ([]Sample, error) {
	res := &FloodResult{}
	changeCtx, cancel := context.WithTimeout(ctx, time.Duration(n)*f.ChangeEvery+f.ChangeEvery/2)
	err := f.change(changeCtx, nil, res)
	cancel()
	if err != nil {
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, f.Window)
	defer cancel()
	for i := range res.Changes {
		c := &res.Changes[i]
		if c.Reconciled, err = f.QuietTracker.WaitFor(waitCtx, c.Key, c.Generation); err != nil {
			return nil, err
		}
	}
	return res.Latencies(time.Time{}), nil
}
