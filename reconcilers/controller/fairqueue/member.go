package fairqueue

import (
	"slices"
	"time"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// entry is the state of one request the queue knows. A request is queued (in
// its member's sub-queue, ready for Get), or being processed, possibly dirty
// (added again meanwhile, to be queued when done), and independently of both it
// may be waiting for a delay to pass.
type entry struct {
	req      mcreconcile.Request
	member   *member
	priority int

	queued     bool
	processing bool
	dirty      bool
	// reclaimed says the queue cancelled it to free its worker; cancelled is
	// the cause its context ends with while in flight (ErrWorkerReclaimed
	// then, or the cause given to Cancel).
	reclaimed bool
	cancelled error

	// inLane links the entry into its lane while queued.
	inLane link

	// readyAt and heapIndex place the entry in the waiting heap; heapIndex is
	// -1 when it is not waiting.
	readyAt   time.Time
	heapIndex int

	// addedAt and startedAt time the entry for metrics.
	addedAt   time.Time
	startedAt time.Time

	// While processing, handedSeq and handedAt say when the entry was handed
	// out, and inFlight links it into its member's requests in flight, oldest
	// first.
	handedSeq uint64
	handedAt  time.Time
	inFlight  link
}

func (e *entry) isWaiting() bool { return e.heapIndex >= 0 }

// member is one cluster's sub-queue: first in, first out lanes of queued
// entries, one per priority, highest first. While it has queued entries it
// sits in the queue's ring of members.
type member struct {
	name multicluster.ClusterName
	// entries counts the queue's entries of this member; the member is
	// forgotten when it drops to zero.
	entries int
	// ready counts the queued entries over all lanes.
	ready int
	// processing counts the entries handed out and not yet done.
	processing int
	// lanes holds only lanes with entries, by descending priority; it starts
	// in laneBuf, as most members use one priority.
	lanes   []lane
	laneBuf [1]lane
	// prev and next link the member into the queue's ring while it may be
	// handed a request.
	prev, next *member
	// flight holds its requests in flight, oldest first.
	flight entryList
	// doneSeq is the queue's sequence number of its last answer: a Done in
	// time of a request the queue did not reclaim.
	doneSeq uint64
	// silent is set while the last of its requests to be done was not
	// answered: reclaimed, or done after stallAfter.
	silent bool
	// quiet is set while it has a request ready, nothing in flight and is
	// not silent; the queue counts such members.
	quiet bool
}

func (m *member) inRing() bool { return m.next != nil }

// lane is a first in, first out list of queued entries of one priority.
type lane struct {
	priority int
	entryList
}

// link threads an entry into one entryList.
type link struct{ prev, next *entry }

// laneLink and flightLink select the link of an entry that threads it into
// its lane and into its member's requests in flight.
func laneLink(e *entry) *link   { return &e.inLane }
func flightLink(e *entry) *link { return &e.inFlight }

// entryList is a first in, first out list of entries, threaded through one
// link of each entry, the one that the at function given to its methods
// selects.
type entryList struct{ head, tail *entry }

// pushBack appends e to l.
func (l *entryList) pushBack(e *entry, at func(*entry) *link) {
	*at(e) = link{prev: l.tail}
	if l.tail != nil {
		at(l.tail).next = e
	} else {
		l.head = e
	}
	l.tail = e
}

// remove takes e, which is in l, out of it.
func (l *entryList) remove(e *entry, at func(*entry) *link) {
	lk := at(e)
	if lk.prev != nil {
		at(lk.prev).next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		at(lk.next).prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	*lk = link{}
}

// pushFlight appends e, just handed out, to m's requests in flight.
func (m *member) pushFlight(e *entry) { m.flight.pushBack(e, flightLink) }

// unlinkFlight removes e, just done, from m's requests in flight.
func (m *member) unlinkFlight(e *entry) { m.flight.remove(e, flightLink) }

// push appends e to the lane of its priority.
func (m *member) push(e *entry) {
	m.lane(e.priority).pushBack(e, laneLink)
	e.queued = true
	m.ready++
}

// pop removes and returns the first entry of the highest lane; m.ready > 0.
func (m *member) pop() *entry {
	e := m.lanes[0].head
	m.unlink(e)
	return e
}

// unlink removes the queued e from its lane, and the lane when it empties.
func (m *member) unlink(e *entry) {
	i := m.laneIndex(e.priority)
	l := &m.lanes[i]
	l.remove(e, laneLink)
	e.queued = false
	m.ready--
	if l.head == nil {
		m.lanes = slices.Delete(m.lanes, i, i+1)
	}
}

// lane returns the lane of priority p, adding it if needed. The pointer is
// valid until the next change of m.lanes.
func (m *member) lane(p int) *lane {
	if m.lanes == nil {
		m.lanes = m.laneBuf[:0]
	}
	i := 0
	for ; i < len(m.lanes); i++ {
		if m.lanes[i].priority == p {
			return &m.lanes[i]
		}
		if m.lanes[i].priority < p {
			break
		}
	}
	m.lanes = slices.Insert(m.lanes, i, lane{priority: p})
	return &m.lanes[i]
}

// laneIndex returns the index of the existing lane of priority p.
func (m *member) laneIndex(p int) int {
	for i, l := range m.lanes {
		if l.priority == p {
			return i
		}
	}
	panic("fairqueue: queued entry without its lane")
}

// waitHeap is a min-heap of waiting entries by readyAt.
type waitHeap []*entry

func (h *waitHeap) push(e *entry) {
	e.heapIndex = len(*h)
	*h = append(*h, e)
	h.up(e.heapIndex)
}

// pop removes and returns the earliest entry; the heap is not empty.
func (h *waitHeap) pop() *entry {
	e := (*h)[0]
	h.remove(e)
	return e
}

func (h *waitHeap) remove(e *entry) {
	i := e.heapIndex
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	e.heapIndex = -1
	if i != last {
		h.fix((*h)[i])
	}
}

// fix restores the heap after e.readyAt changed.
func (h waitHeap) fix(e *entry) {
	if !h.down(e.heapIndex) {
		h.up(e.heapIndex)
	}
}

func (h waitHeap) less(i, j int) bool { return h[i].readyAt.Before(h[j].readyAt) }

func (h waitHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}

func (h waitHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts element i down and reports whether it moved.
func (h waitHeap) down(i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(h) {
			break
		}
		if right := child + 1; right < len(h) && h.less(right, child) {
			child = right
		}
		if !h.less(child, i) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}
