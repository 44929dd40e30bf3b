package fairqueue

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// position hands out requests until want and returns its 1-based position.
// Every request handed out is done at once, as by a single worker.
func position(t *testing.T, q *Queue, want mcreconcile.Request) int {
	t.Helper()
	for n := 1; ; n++ {
		got := mustGet(t, q)
		q.Done(got)
		if got == want {
			return n
		}
	}
}

func TestQuietMemberIsServedDuringAFlood(t *testing.T) {
	const flood = 5000
	live := req("b", "live")
	tests := []struct {
		name string
		// fill queues the flood and others' requests before live is added.
		fill func(q *Queue)
		// before is how many requests are handed out before live is added.
		before int
		// maxPosition is the latest position live may be handed out at after it is added.
		maxPosition int
	}{{
		name: "one flooding member",
		fill: func(q *Queue) {
			for i := range flood {
				q.Add(req("a", fmt.Sprint(i)))
			}
		},
		maxPosition: 2,
	}, {
		name: "flood in progress",
		fill: func(q *Queue) {
			for i := range flood {
				q.Add(req("a", fmt.Sprint(i)))
			}
		},
		before:      1234,
		maxPosition: 2,
	}, {
		name: "newly engaged member's initial list at low priority",
		fill: func(q *Queue) {
			for i := range flood {
				q.AddWithOpts(priorityqueue.AddOpts{Priority: new(handler.LowPriority)}, req("new", fmt.Sprint(i)))
			}
		},
		maxPosition: 2,
	}, {
		name: "a flooding member using a high priority",
		fill: func(q *Queue) {
			for i := range flood {
				q.AddWithOpts(priorityqueue.AddOpts{Priority: new(100)}, req("a", fmt.Sprint(i)))
			}
		},
		maxPosition: 2,
	}, {
		name: "three flooding members",
		fill: func(q *Queue) {
			for i := range flood {
				for _, c := range []string{"a", "c", "d"} {
					q.Add(req(c, fmt.Sprint(i)))
				}
			}
		},
		before:      10,
		maxPosition: 4,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := newTestQueue(t)
			tt.fill(q)
			for range tt.before {
				q.Done(mustGet(t, q))
			}
			q.Add(live)
			if got := position(t, q, live); got > tt.maxPosition {
				t.Fatalf("live request of a quiet member handed out at position %d after it was added, want at most %d", got, tt.maxPosition)
			}
		})
	}
}

func TestMembersTakeTurns(t *testing.T) {
	q, _ := newTestQueue(t)
	// a queues three requests, then b two, then c one.
	for _, r := range []mcreconcile.Request{
		req("a", "1"), req("a", "2"), req("a", "3"), req("b", "1"), req("b", "2"), req("c", "1"),
	} {
		q.Add(r)
	}
	want := []mcreconcile.Request{
		req("a", "1"), req("b", "1"), req("c", "1"),
		req("a", "2"), req("b", "2"),
		req("a", "3"),
	}
	expectServed(t, q, want...)
}

// A member that gets a ready request waits for one turn of each member that has
// ready requests, as a flow joining the tail of deficit round robin's active list.
func TestMemberJoiningWaitsOneTurnOfEachOther(t *testing.T) {
	q, _ := newTestQueue(t)
	for _, c := range []string{"a", "b", "c"} {
		q.Add(req(c, "1"))
		q.Add(req(c, "2"))
	}
	expectGet(t, q, req("a", "1"))
	q.Add(req("d", "1"))
	for _, w := range []mcreconcile.Request{req("b", "1"), req("c", "1"), req("a", "2"), req("d", "1"), req("b", "2")} {
		expectGet(t, q, w)
	}
}

func TestPriorityOrdersRequestsWithinAMember(t *testing.T) {
	q, _ := newTestQueue(t)
	low, normal, high := new(handler.LowPriority), new(0), new(10)
	q.AddWithOpts(priorityqueue.AddOpts{Priority: low}, req("a", "low1"), req("a", "low2"))
	q.AddWithOpts(priorityqueue.AddOpts{Priority: normal}, req("a", "normal"))
	q.AddWithOpts(priorityqueue.AddOpts{Priority: high}, req("a", "high"))
	// Raising a queued request's priority moves it to the end of the higher lane;
	// lowering it does nothing.
	q.AddWithOpts(priorityqueue.AddOpts{Priority: high}, req("a", "low2"))
	q.AddWithOpts(priorityqueue.AddOpts{Priority: low}, req("a", "normal"))

	for _, w := range []struct {
		name     string
		priority int
	}{{"high", 10}, {"low2", 10}, {"normal", 0}, {"low1", handler.LowPriority}} {
		r, p, shutdown := q.GetWithPriority()
		if shutdown || r != req("a", w.name) || p != w.priority {
			t.Fatalf("GetWithPriority = %v, %d, %v; want %v, %d, false", r, p, shutdown, req("a", w.name), w.priority)
		}
		q.Done(r)
	}
	expectEmpty(t, q)
}

func TestPriorityOfARequestAddedWhileProcessed(t *testing.T) {
	q, _ := newTestQueue(t)
	a := req("a", "x")
	q.AddWithOpts(priorityqueue.AddOpts{Priority: new(5)}, a)
	expectGet(t, q, a)
	// The next processing starts at the priority it is added with.
	q.AddWithOpts(priorityqueue.AddOpts{Priority: new(handler.LowPriority)}, a)
	q.AddWithOpts(priorityqueue.AddOpts{Priority: new(1)}, a)
	q.Done(a)
	if r, p, _ := q.GetWithPriority(); r != a || p != 1 {
		t.Fatalf("GetWithPriority = %v, %d; want %v, 1", r, p, a)
	}
	q.Done(a)
	expectEmpty(t, q)
}

func TestMembersAreFreedWhenEmpty(t *testing.T) {
	q, clk := newTestQueue(t)
	// Members come and go, with requests queued, delayed, requeued while
	// processed and rate limited.
	for round := range 3 {
		for i := range 100 {
			c := fmt.Sprintf("member-%d-%d", round, i)
			q.Add(req(c, "x"))
			q.Add(req(c, "y"))
			q.AddRateLimited(req(c, "z"))
		}
		requeued := map[mcreconcile.Request]bool{}
		handedOut := 0
		for q.Len() > 0 {
			r := mustGet(t, q)
			handedOut++
			if r.Name == "x" && !requeued[r] {
				requeued[r] = true
				q.Add(r)
			}
			q.Done(r)
		}
		if handedOut != 300 {
			t.Fatalf("handed out %d requests, want 300", handedOut)
		}
		step(t, q, clk, time.Second)
		for q.Len() > 0 {
			q.Done(mustGet(t, q))
		}
		expectEmpty(t, q)
	}
}

// A member at MaxInFlightPerMember waits for one of its requests to be done,
// while the other members' requests go on being handed out.
func TestMaxInFlightPerMemberLeavesWorkersForOthers(t *testing.T) {
	q := NewWithOptions(Options{Name: t.Name(), MaxInFlightPerMember: 2})
	t.Cleanup(q.ShutDown)
	for _, r := range []mcreconcile.Request{req("a", "1"), req("a", "2"), req("a", "3"), req("a", "4"), req("b", "1")} {
		q.Add(r)
	}
	for _, w := range []mcreconcile.Request{req("a", "1"), req("b", "1"), req("a", "2")} {
		expectGet(t, q, w)
	}
	expectLen(t, q, 2) // a3 and a4 stay ready, though a may not take them now

	// A worker that reaches Get waits there: a's ready requests are not
	// handed out while a has 2 in flight.
	got := getInBackground(q)
	waitForBlockedGets(t, 1)
	expectStillBlocked(t, got, "while a had 2 in flight")
	q.Add(req("c", "1")) // another member is served at once
	if r := receive(t, got); r != req("c", "1") {
		t.Fatalf("Get = %v, want c/1", r)
	}

	q.Done(req("b", "1")) // b's slot does not free a's
	got = getInBackground(q)
	waitForBlockedGets(t, 1)
	expectStillBlocked(t, got, "while a had 2 in flight")
	q.Done(req("a", "1"))
	if r := receive(t, got); r != req("a", "3") {
		t.Fatalf("Get = %v, want a/3", r)
	}
	// A request added again while processed comes back within the bound.
	q.Add(req("a", "2"))
	q.Done(req("a", "2"))
	expectGet(t, q, req("a", "4"))
	q.Done(req("a", "3"))
	expectGet(t, q, req("a", "2"))
	for _, r := range []mcreconcile.Request{req("a", "2"), req("a", "4"), req("c", "1")} {
		q.Done(r)
	}
	expectEmpty(t, q)
}
