package fairqueue

import (
	"context"
	"errors"
	"time"

	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// ErrWorkerReclaimed is the cause of a processing context (Context) that the
// queue cancelled to give its worker to a member that waited with none.
var ErrWorkerReclaimed = errors.New("worker reclaimed for a member waiting with nothing in flight")

// Context returns the context to process req with, which the worker got from
// Get: parent, which the queue cancels with cause ErrWorkerReclaimed when it
// takes the worker back (see the package documentation). The worker calls the
// returned function when it is done with req, before Done. A request the
// queue does not hold in flight gets a context it never cancels.
func (q *Queue) Context(parent context.Context, req mcreconcile.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	q.mu.Lock()
	if e := q.entries[req]; e != nil && e.processing {
		if e.cancelled != nil {
			cancel(e.cancelled)
		} else {
			q.cancels[e] = cancel
		}
	}
	q.mu.Unlock()
	return ctx, func() { cancel(nil) }
}

// Cancel cancels the context that req is being processed with (Context),
// with cause, when req is in flight, and reports whether it was: for a
// request whose object is gone, so that the work on it stops at once rather
// than when its calls end. Unlike a reclaim, it leaves req's member as it
// is: the request fails and is retried like any failure, and if it was
// added meanwhile it is queued again on Done, as always.
func (q *Queue) Cancel(req mcreconcile.Request, cause error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries[req]
	if e == nil || !e.processing || e.cancelled != nil {
		return false
	}
	q.cancelEntry(e, cause)
	return true
}

// cancelEntry ends the context of e, in flight, with cause, or has Context
// end it at once if its worker has not asked for it yet; q.mu is held.
func (q *Queue) cancelEntry(e *entry, cause error) {
	e.cancelled = cause
	if cancel := q.cancels[e]; cancel != nil {
		cancel(cause)
	}
}

// updateQuiet counts m as quiet while it has a request ready, nothing in
// flight and is not silent; q.mu is held.
func (q *Queue) updateQuiet(m *member) {
	quiet := m.ready > 0 && m.processing == 0 && !m.silent
	if quiet == m.quiet {
		return
	}
	m.quiet = quiet
	if quiet {
		q.quiet++
		return
	}
	q.quiet--
	if q.quiet == 0 {
		q.owed = 0
	}
}

// quietMember returns the first quiet member in the round, or nil; q.mu is held.
func (q *Queue) quietMember() *member {
	if q.quiet == 0 || q.next == nil {
		return nil
	}
	for m := q.next; ; m = m.next {
		if m.quiet {
			return m
		}
		if m.next == q.next {
			return nil
		}
	}
}

// checkStarving notes when quiet members start to wait with every worker busy
// and no worker being reclaimed for each of them, and wakes the reclaiming
// loop then; q.mu is held. It is called whenever those counts change.
func (q *Queue) checkStarving() {
	starving := q.workers > 0 && q.processing >= q.workers && q.quiet > q.reclaiming
	if starving == q.starving {
		return
	}
	q.starving = starving
	if starving {
		select {
		case q.wakeReclaim <- struct{}{}:
		default:
		}
	}
}

// reclaimLoop takes workers back for starving quiet members once every
// worker has been busy for reclaimAfter, none coming free.
func (q *Queue) reclaimLoop() {
	for {
		q.mu.Lock()
		var wait time.Duration
		if q.starving {
			wait = q.reclaimAfter - q.clock.Since(q.fullSince)
			if wait <= 0 {
				q.reclaim()
				wait = 0
			}
		}
		q.mu.Unlock()

		if q.sleep(wait, q.wakeReclaim) {
			return
		}
	}
}

// reclaim cancels requests in flight, the longest held first, until a worker
// is coming free for every quiet member; q.mu is held. Every request in
// flight has been held at least reclaimAfter: none was done since.
func (q *Queue) reclaim() {
	for q.starving {
		e := q.longestHeld()
		if e == nil {
			return // every one is being reclaimed already
		}
		e.reclaimed = true
		q.reclaiming++
		q.owed++
		q.cancelEntry(e, ErrWorkerReclaimed)
		q.checkStarving()
	}
}

// longestHeld returns the request in flight the longest that is not being
// reclaimed yet, or nil; q.mu is held.
func (q *Queue) longestHeld() *entry {
	var oldest *entry
	for m := range q.busy {
		for e := m.flight.head; e != nil; e = e.inFlight.next {
			if !e.reclaimed {
				if oldest == nil || e.handedSeq < oldest.handedSeq {
					oldest = e
				}
				break
			}
		}
	}
	return oldest
}
