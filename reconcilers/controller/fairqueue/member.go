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

	// prev and next link the entry into its lane while queued.
	prev, next *entry

	// readyAt and heapIndex place the entry in the waiting heap; heapIndex is
	// -1 when it is not waiting.
	readyAt   time.Time
	heapIndex int

	// addedAt and startedAt time the entry for metrics.
	addedAt   time.Time
	startedAt time.Time

	// While processing, handedSeq and handedAt say when the entry was handed
	// out, and flightPrev and flightNext link it into its member's requests
	// in flight, oldest first.
	handedSeq              uint64
	handedAt               time.Time
	flightPrev, flightNext *entry
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
	// flightHead and flightTail hold its requests in flight, oldest first.
	flightHead, flightTail *entry
	// doneSeq is the queue's sequence number of its last Done.
	doneSeq uint64
}

func (m *member) inRing() bool { return m.next != nil }

// lane is a first in, first out list of queued entries of one priority.
type lane struct {
	priority   int
	head, tail *entry
}

// pushFlight appends e, just handed out, to m's requests in flight.
func (m *member) pushFlight(e *entry) {
	e.flightPrev, e.flightNext = m.flightTail, nil
	if m.flightTail != nil {
		m.flightTail.flightNext = e
	} else {
		m.flightHead = e
	}
	m.flightTail = e
}

// unlinkFlight removes e, just done, from m's requests in flight.
func (m *member) unlinkFlight(e *entry) {
	if e.flightPrev != nil {
		e.flightPrev.flightNext = e.flightNext
	} else {
		m.flightHead = e.flightNext
	}
	if e.flightNext != nil {
		e.flightNext.flightPrev = e.flightPrev
	} else {
		m.flightTail = e.flightPrev
	}
	e.flightPrev, e.flightNext = nil, nil
}

// push appends e to the lane of its priority.
func (m *member) push(e *entry) {
	l := m.lane(e.priority)
	e.prev, e.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
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
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
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
