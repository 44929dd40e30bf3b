package fairqueue

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// Options configure a Queue. The zero value is valid.
type Options struct {
	// Name names the queue in metrics.
	Name string
	// RateLimiter computes the delay of AddRateLimited. Defaults to a per-item
	// exponential backoff from 5 ms to 1000 s, controller-runtime's default.
	RateLimiter workqueue.TypedRateLimiter[mcreconcile.Request]
	// MetricsProvider, when set, receives client-go's workqueue metrics.
	MetricsProvider workqueue.MetricsProvider
	// Clock tells the time of delayed adds and metrics. Defaults to the real clock.
	Clock clock.Clock
	// MaxInFlightPerMember, when positive, bounds the requests of one member
	// handed out and not yet done. Workers beyond it stay free for the other
	// members, however slow or hung the busy member's API server is.
	MaxInFlightPerMember int
	// Workers, when positive, is how many workers call Get (a controller's
	// MaxConcurrentReconciles). It bounds the unresponsive members as a whole:
	// between them they hold at most MaxInFlightPerMember of the workers
	// (Workers when that is not set), and never all of them; see the package
	// documentation. It also lets the queue reclaim workers for quiet
	// members (ReclaimAfter). Zero leaves the unresponsive members unbounded
	// as a whole and reclaims nothing.
	Workers int
	// StallAfter is how long a request may be in flight before its member
	// counts as unresponsive. Defaults to DefaultStallAfter.
	StallAfter time.Duration
	// ReclaimAfter is how long every worker may stay busy, none coming free,
	// while a member with nothing in flight has a request ready; then the
	// queue cancels the request held longest (see Context) to give its
	// worker to that member. Only with Workers set. Defaults to
	// DefaultReclaimAfter.
	ReclaimAfter time.Duration
	// OneKeyPerMember tells the queue that every member is one key, so
	// holds at most one request at a time (the registrations' queue). Such a
	// member's request in flight is always one it has answered none since,
	// which for other queues marks a member that stopped answering: here it
	// marks the member unresponsive only once it stalls (StallAfter).
	// Without it, every member being served would count as unresponsive,
	// and a silent member that answers again would wait for all of them.
	OneKeyPerMember bool
}

// DefaultStallAfter is how long a request may be in flight before its member
// counts as unresponsive. A Widget reconcile (two reads from the cache and at
// most two writes) takes milliseconds on a healthy member and well under a
// second behind a busy one's client-side rate limit; a request still in
// flight after 5 seconds is waiting on a member that does not answer, on
// Retry-After answers, or on one much slower than the others.
const DefaultStallAfter = 5 * time.Second

// DefaultReclaimAfter is how long a member with nothing in flight waits,
// while every worker is busy and none comes free, before the queue takes a
// worker back for it. Workers held by members that answer come free within
// milliseconds, one after the other; all of them held a tenth of a second
// without one coming free means they wait on members that do not answer. A
// quiet member may wait for it more than once in a row (its turn comes after
// the silent members not yet seen to be silent), and its change is still
// reconciled well within a second.
const DefaultReclaimAfter = 100 * time.Millisecond

// Queue is a rate-limiting workqueue of mcreconcile.Request that serves member
// clusters round robin. Use New or NewWithOptions to build one.
type Queue struct {
	rateLimiter workqueue.TypedRateLimiter[mcreconcile.Request]
	clock       clock.Clock
	metrics     *queueMetrics
	maxInFlight int // per member; 0 is no bound
	// maxUnresponsive bounds the requests in flight of unresponsive members
	// as a whole; -1 is no bound.
	maxUnresponsive int
	stallAfter      time.Duration
	oneKeyPerMember bool
	// workers is Options.Workers; 0 turns reclaiming off.
	workers      int
	reclaimAfter time.Duration

	mu sync.Mutex
	// cond is signalled when a request becomes ready, the queue shuts down, or,
	// while draining, a request is done.
	cond sync.Cond
	// entries holds every request that is ready, waiting or being processed.
	entries map[mcreconcile.Request]*entry
	// members holds the members with at least one entry.
	members map[multicluster.ClusterName]*member
	// next is the member whose turn comes next in the ring of members that may
	// be handed a request: those with ready requests and fewer than maxInFlight
	// in flight. It is nil when none may.
	next       *member
	ready      int // requests that Get can hand out
	processing int // requests handed out and not yet done
	waiting    waitHeap
	// busy holds the members with requests in flight.
	busy map[*member]struct{}
	// seq orders hand-outs and Dones, to tell whether a member answered
	// since a request was handed out.
	seq uint64
	// capped is set when a Get waits although members have ready requests,
	// because the unresponsive members are at their bound; Done wakes the
	// waiting Gets then.
	capped bool

	// quiet counts the members with a request ready, nothing in flight and
	// an answer to their last request (member.quiet); reclaiming counts the
	// requests cancelled to give their workers back and not yet done, and
	// owed the workers so freed that are still to go to quiet members.
	quiet, reclaiming, owed int
	// starving is set while quiet members wait with every worker busy and
	// none being reclaimed for them; fullSince is when the last free worker
	// was taken.
	starving  bool
	fullSince time.Time
	// cancels holds the cancel functions of the contexts requests in
	// flight are processed with (Context); not in entry, which every queued
	// request has.
	cancels map[*entry]context.CancelCauseFunc

	shuttingDown bool
	draining     bool

	// wake tells the waiting loop that the earliest delayed request changed.
	wake chan struct{}
	// wakeReclaim tells the reclaiming loop that quiet members started to starve.
	wakeReclaim chan struct{}
	stop        chan struct{}
	stopOnce    sync.Once
	// loops tracks the background goroutines.
	loops sync.WaitGroup
}

var _ priorityqueue.PriorityQueue[mcreconcile.Request] = &Queue{}

// New returns a fair queue named name that delays AddRateLimited by rl.
// Its signature is that of the NewQueue option of controller-runtime and
// multicluster-runtime controllers.
func New(name string, rl workqueue.TypedRateLimiter[mcreconcile.Request]) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	return NewWithOptions(Options{Name: name, RateLimiter: rl})
}

// NewWithOptions returns a fair queue. Call ShutDown to release it.
func NewWithOptions(o Options) *Queue {
	if o.RateLimiter == nil {
		o.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](5*time.Millisecond, 1000*time.Second)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.StallAfter <= 0 {
		o.StallAfter = DefaultStallAfter
	}
	if o.ReclaimAfter <= 0 {
		o.ReclaimAfter = DefaultReclaimAfter
	}
	q := &Queue{
		rateLimiter:     o.RateLimiter,
		clock:           o.Clock,
		maxInFlight:     max(0, o.MaxInFlightPerMember),
		maxUnresponsive: UnresponsiveBound(o.Workers, o.MaxInFlightPerMember),
		stallAfter:      o.StallAfter,
		oneKeyPerMember: o.OneKeyPerMember,
		workers:         max(0, o.Workers),
		reclaimAfter:    o.ReclaimAfter,
		entries:         map[mcreconcile.Request]*entry{},
		members:         map[multicluster.ClusterName]*member{},
		busy:            map[*member]struct{}{},
		cancels:         map[*entry]context.CancelCauseFunc{},
		wake:            make(chan struct{}, 1),
		wakeReclaim:     make(chan struct{}, 1),
		stop:            make(chan struct{}),
	}
	q.cond.L = &q.mu
	q.metrics = newQueueMetrics(o.MetricsProvider, o.Name, o.Clock)
	q.loops.Go(q.waitingLoop)
	if q.workers > 0 {
		q.loops.Go(q.reclaimLoop)
	}
	if q.metrics != nil {
		q.loops.Go(q.metricsLoop)
	}
	return q
}

// Add queues req. A request that is already queued stays where it is; one that
// is being processed is queued again when it is done.
func (q *Queue) Add(req mcreconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, req)
}

// AddAfter queues req once d has passed. A request that is already ready stays
// ready; of several delays of a waiting request the earliest wins.
func (q *Queue) AddAfter(req mcreconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, req)
}

// AddRateLimited queues req after the delay its rate limiter says.
func (q *Queue) AddRateLimited(req mcreconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, req)
}

// AddWithOpts queues reqs as controller-runtime's priority queue does: with the
// smaller of o.After and the rate limiter's delay when o.RateLimited is set, and
// at the higher of the request's queued priority and o.Priority (zero when nil).
// Requests added after ShutDown are dropped.
func (q *Queue) AddWithOpts(o priorityqueue.AddOpts, reqs ...mcreconcile.Request) {
	if len(reqs) == 0 {
		return
	}
	priority := 0
	if o.Priority != nil {
		priority = *o.Priority
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	for _, req := range reqs {
		after := o.After
		if o.RateLimited {
			if d := q.rateLimiter.When(req); after <= 0 || d < after {
				after = d
			}
		}
		q.add(req, priority, after)
	}
}

// add queues one request; q.mu is held.
func (q *Queue) add(req mcreconcile.Request, priority int, after time.Duration) {
	e := q.entries[req]
	if e == nil {
		e = q.newEntry(req, priority)
	} else if !e.queued && !e.dirty && !e.isWaiting() {
		// Only being processed: this add starts a new life of the request.
		e.priority = priority
	} else if priority > e.priority {
		q.raise(e, priority)
	}

	if after > 0 {
		q.metrics.retry()
		if e.queued || e.dirty {
			return // already ready
		}
		readyAt := q.clock.Now().Add(after)
		if e.isWaiting() {
			if !readyAt.Before(e.readyAt) {
				return
			}
			e.readyAt = readyAt
			q.waiting.fix(e)
		} else {
			e.readyAt = readyAt
			q.waiting.push(e)
		}
		if q.waiting[0] == e {
			q.wakeWaitingLoop()
		}
		return
	}

	if e.isWaiting() {
		q.waiting.remove(e)
	}
	q.makeReady(e)
}

// makeReady queues e for Get, or marks it to be queued when it is done; q.mu is held.
func (q *Queue) makeReady(e *entry) {
	switch {
	case e.queued || e.dirty:
		return
	case e.processing:
		e.dirty = true
		q.metrics.add(e)
		return
	}
	q.metrics.add(e)
	q.enqueue(e)
}

// enqueue appends e to its member's sub-queue; q.mu is held.
func (q *Queue) enqueue(e *entry) {
	m := e.member
	m.push(e)
	q.ready++
	q.updateRing(m)
	if m.inRing() {
		q.cond.Signal()
	}
	q.checkStarving()
}

// raise moves a queued e to a higher priority; q.mu is held.
func (q *Queue) raise(e *entry, priority int) {
	if !e.queued {
		e.priority = priority
		return
	}
	m := e.member
	m.unlink(e)
	e.priority = priority
	m.push(e)
}

// Get blocks until a request is ready and hands it out; shutdown is true when
// the queue shuts down. The caller must call Done with the request.
func (q *Queue) Get() (req mcreconcile.Request, shutdown bool) {
	req, _, shutdown = q.GetWithPriority()
	return req, shutdown
}

// GetWithPriority is Get that also returns the request's priority.
func (q *Queue) GetWithPriority() (req mcreconcile.Request, priority int, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var m *member
	for {
		if q.shuttingDown && !q.draining {
			return req, 0, true
		}
		if m = q.pick(); m != nil {
			break
		}
		if q.shuttingDown && q.processing == 0 {
			// Drained: nothing is ready and nothing in flight can be queued again.
			return req, 0, true
		}
		if q.next != nil {
			q.capped = true
		}
		q.cond.Wait()
	}

	if m.quiet && q.owed > 0 {
		q.owed--
	}
	e := m.pop()
	q.ready--
	e.processing = true
	e.reclaimed = false
	m.processing++
	q.processing++
	q.seq++
	e.handedSeq, e.handedAt = q.seq, q.clock.Now()
	if q.processing == q.workers {
		q.fullSince = e.handedAt
	}
	m.pushFlight(e)
	q.busy[m] = struct{}{}
	q.next = m.next
	q.updateRing(m)
	q.checkStarving()
	q.metrics.get(e)
	return e.req, e.priority, false
}

// UnresponsiveBound is how many requests in flight the unresponsive members
// may hold between them, with workers workers and perMember the bound of one
// member (zero: none): perMember, or workers without one, and at most
// workers-1, so that a worker is always left to the members that answer. It
// is -1, no bound, when workers is not known (zero).
func UnresponsiveBound(workers, perMember int) int {
	if workers <= 0 {
		return -1
	}
	bound := workers - 1
	if perMember > 0 {
		bound = min(bound, perMember)
	}
	return bound
}

// pick returns the member whose turn it is among those that may be handed a
// request now, or nil; q.mu is held. A worker reclaimed for the quiet members
// goes to one of them first. Members in the ring are under their own bound; of
// those, an unresponsive one is passed over while the unresponsive members
// hold maxUnresponsive requests or more (or any, when that is zero).
func (q *Queue) pick() *member {
	if q.owed > 0 {
		if m := q.quietMember(); m != nil {
			return m
		}
	}
	if q.next == nil || q.maxUnresponsive < 0 {
		return q.next
	}
	now := q.clock.Now()
	if !q.unresponsive(q.next, now) {
		return q.next
	}
	if q.unresponsiveInFlight(now) < max(1, q.maxUnresponsive) {
		// Only one that is silent with nothing in flight gets past a bound of zero.
		return q.next
	}
	for m := q.next.next; m != q.next; m = m.next {
		if !q.unresponsive(m, now) {
			return m
		}
	}
	return nil
}

// unresponsive reports whether m is silent (its last request to end was not
// answered), or has a request in flight that m has answered none since
// (unless Options.OneKeyPerMember), or that has been in flight for
// stallAfter; q.mu is held. The oldest request in flight tells: it is the
// first to go unanswered and the first to stall.
func (q *Queue) unresponsive(m *member, now time.Time) bool {
	if m.silent {
		return true
	}
	oldest := m.flight.head
	if oldest == nil {
		return false
	}
	unanswered := m.doneSeq < oldest.handedSeq && !q.oneKeyPerMember
	return unanswered || now.Sub(oldest.handedAt) >= q.stallAfter
}

// unresponsiveInFlight counts the requests in flight of unresponsive members; q.mu is held.
func (q *Queue) unresponsiveInFlight(now time.Time) int {
	n := 0
	for m := range q.busy {
		if q.unresponsive(m, now) {
			n += m.processing
		}
	}
	return n
}

// Done marks req as processed. If it was added while being processed, it is
// queued again.
func (q *Queue) Done(req mcreconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entries[req]
	if e == nil || !e.processing {
		return
	}
	q.metrics.done(e)
	e.processing = false
	m := e.member
	m.processing--
	q.processing--
	q.seq++
	// An answer is a request done in time that the queue did not cancel; a
	// request given up on its deadline or reclaimed leaves its member silent,
	// and one cancelled (Cancel) says nothing of it.
	if e.reclaimed {
		q.reclaiming--
		m.silent = true
	} else if e.cancelled != nil {
		// neither an answer nor a silence
	} else if q.clock.Since(e.handedAt) >= q.stallAfter {
		m.silent = true
	} else {
		m.silent = false
		m.doneSeq = q.seq
	}
	e.reclaimed, e.cancelled = false, nil
	if len(q.cancels) > 0 {
		delete(q.cancels, e)
	}
	m.unlinkFlight(e)
	if m.processing == 0 {
		delete(q.busy, m)
	}
	if q.capped {
		// An unresponsive member's request is done, or a member answered:
		// the Gets waiting on the bound look again.
		q.capped = false
		q.cond.Broadcast()
	}
	if e.dirty {
		e.dirty = false
		q.enqueue(e)
	} else {
		// The member may take a turn again if it was at its bound.
		if q.updateRing(e.member) {
			q.cond.Signal()
		}
		if !e.isWaiting() {
			q.release(e)
		}
	}
	q.checkStarving()
	if q.draining {
		q.cond.Broadcast()
	}
}

// Forget resets the rate limiter's backoff of req.
func (q *Queue) Forget(req mcreconcile.Request) {
	q.rateLimiter.Forget(req)
}

// NumRequeues returns how often req was rate limited since it was last forgotten.
func (q *Queue) NumRequeues(req mcreconcile.Request) int {
	return q.rateLimiter.NumRequeues(req)
}

// Len returns the number of requests ready to be handed out; it counts neither
// delayed requests nor requests being processed.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready
}

// MemberLen returns how many requests of the member called name are ready to
// be handed out (its share of Len) and how many are handed out and not yet
// done; both are zero for a member the queue holds nothing of.
func (q *Queue) MemberLen(name multicluster.ClusterName) (ready, inFlight int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.members[name]; m != nil {
		return m.ready, m.processing
	}
	return 0, 0
}

// ShutDown drops new and delayed requests and makes every Get return shutdown,
// at once, without handing out the requests still queued. Done may still be called.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	q.shuttingDown = true
	q.draining = false
	q.cond.Broadcast()
	q.mu.Unlock()
	q.stopLoops()
}

// ShutDownWithDrain drops new and delayed requests, keeps handing out the
// queued ones, and returns when none is ready or being processed. Workers must
// keep calling Get and Done meanwhile; a later ShutDown ends the wait.
func (q *Queue) ShutDownWithDrain() {
	q.mu.Lock()
	if !q.shuttingDown {
		q.draining = true
	}
	q.shuttingDown = true
	q.cond.Broadcast()
	q.mu.Unlock()
	q.stopLoops()

	q.mu.Lock()
	defer q.mu.Unlock()
	for q.draining && (q.ready > 0 || q.processing > 0) {
		q.cond.Wait()
	}
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *Queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// newEntry records req with its member; q.mu is held.
func (q *Queue) newEntry(req mcreconcile.Request, priority int) *entry {
	m := q.members[req.ClusterName]
	if m == nil {
		m = &member{name: req.ClusterName}
		q.members[req.ClusterName] = m
	}
	m.entries++
	e := &entry{req: req, member: m, priority: priority, heapIndex: -1}
	q.entries[req] = e
	return e
}

// release forgets e, and its member when it was the member's last; q.mu is held.
func (q *Queue) release(e *entry) {
	delete(q.entries, e.req)
	m := e.member
	m.entries--
	if m.entries == 0 {
		delete(q.members, m.name)
	}
}

// updateRing puts m in the ring when it may be handed a request, and takes it
// out when not, and counts it as quiet or not; it reports whether m joined.
// q.mu is held.
func (q *Queue) updateRing(m *member) (joined bool) {
	q.updateQuiet(m)
	eligible := m.ready > 0 && (q.maxInFlight == 0 || m.processing < q.maxInFlight)
	switch {
	case eligible && !m.inRing():
		q.joinRing(m)
		return true
	case !eligible && m.inRing():
		q.leaveRing(m)
	}
	return false
}

// joinRing gives m the last turn of the current round; q.mu is held.
func (q *Queue) joinRing(m *member) {
	if q.next == nil {
		m.prev, m.next = m, m
		q.next = m
		return
	}
	last := q.next.prev
	m.prev, m.next = last, q.next
	last.next = m
	q.next.prev = m
}

// leaveRing removes m from the ring; q.mu is held.
func (q *Queue) leaveRing(m *member) {
	if m.next == m {
		q.next = nil
	} else {
		m.prev.next = m.next
		m.next.prev = m.prev
		if q.next == m {
			q.next = m.next
		}
	}
	m.prev, m.next = nil, nil
}

// waitingLoop moves delayed requests to their members' sub-queues when they are due.
func (q *Queue) waitingLoop() {
	for {
		q.mu.Lock()
		now := q.clock.Now()
		for len(q.waiting) > 0 && !q.waiting[0].readyAt.After(now) {
			e := q.waiting.pop()
			q.makeReady(e)
		}
		var next time.Duration
		if len(q.waiting) > 0 {
			next = q.waiting[0].readyAt.Sub(now)
		}
		q.mu.Unlock()

		if q.sleep(next, q.wake) {
			return
		}
	}
}

// sleep waits for d (without end when d is zero), a signal on wake, or the
// queue's stop, and tells whether the queue stopped.
func (q *Queue) sleep(d time.Duration, wake <-chan struct{}) (stopped bool) {
	var timeout <-chan time.Time
	if d > 0 {
		t := q.clock.NewTimer(d)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-q.stop:
		return true
	case <-wake:
	case <-timeout:
	}
	return false
}

func (q *Queue) wakeWaitingLoop() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// stopLoops ends the background goroutines and drops the delayed requests.
func (q *Queue) stopLoops() {
	q.stopOnce.Do(func() { close(q.stop) })
	q.loops.Wait()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.waiting) > 0 {
		e := q.waiting.pop()
		if !e.processing && !e.queued && !e.dirty {
			q.release(e)
		}
	}
}
