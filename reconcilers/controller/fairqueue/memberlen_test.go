package fairqueue

import (
	"testing"
	"time"
)

// TestMemberLenCountsEachMembersShare checks the per-member counts that
// widgethub_workqueue_member_depth and _member_in_flight report: ready and
// in flight per member, a delayed request in neither, a request added
// while in flight ready again, and nothing once a member's requests are done.
func TestMemberLenCountsEachMembersShare(t *testing.T) {
	q, clk := newTestQueue(t)
	expect := func(cluster string, ready, inFlight int) {
		t.Helper()
		if r, f := q.MemberLen(req(cluster, "").ClusterName); r != ready || f != inFlight {
			t.Fatalf("MemberLen(%s) = %d ready, %d in flight; want %d, %d", cluster, r, f, ready, inFlight)
		}
	}
	a1, a2, a3, b1 := req("a", "1"), req("a", "2"), req("a", "3"), req("b", "1")
	q.Add(a1)
	q.Add(a2)
	q.Add(a2) // once
	q.Add(b1)
	q.AddAfter(a3, time.Minute)
	expect("a", 2, 0)
	expect("b", 1, 0)
	expect("c", 0, 0)

	expectGet(t, q, a1)
	expect("a", 1, 1)
	q.Add(a1) // dirty: queued again when done, not ready meanwhile
	expect("a", 1, 1)
	q.Done(a1)
	expect("a", 2, 0)

	clk.Step(time.Minute)
	waitFor(t, "the delayed request to become ready", func() bool { r, _ := q.MemberLen("a"); return r == 3 })
	expectServed(t, q, b1, a2, a1, a3)
	expect("a", 0, 0)
	expect("b", 0, 0)
}
