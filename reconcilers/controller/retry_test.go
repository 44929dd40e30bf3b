package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

func request(cluster, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: multicluster.ClusterName(cluster),
		Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}}
}

// A member's retries beyond its burst wait for its budget; another member's
// do not, and a member whose bucket is full again is forgotten.
func TestMemberBudgetDelaysOnlyTheMemberOverIt(t *testing.T) {
	b := newMemberBudget(1, 3)
	for i := range 3 {
		if d := b.When(request("storm", string(rune('a'+i)))); d != 0 {
			t.Fatalf("retry %d of storm within its burst waits %s", i, d)
		}
	}
	if d := b.When(request("storm", "d")); d < 500*time.Millisecond {
		t.Fatalf("storm's retry beyond its burst waits %s, want about a second", d)
	}
	if d := b.When(request("quiet", "a")); d != 0 {
		t.Fatalf("quiet's first retry waits %s behind storm's", d)
	}
	b.mu.Lock()
	b.forgetFull(time.Now().Add(time.Minute))
	left := len(b.members)
	b.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d buckets left once all are full again", left)
	}
}

// The controller's limiter is the larger of the request's own backoff and its member's budget.
func TestRetryRateLimiter(t *testing.T) {
	rl := retryRateLimiter()
	r := request("a", "w")
	if d := rl.When(r); d != 5*time.Millisecond {
		t.Fatalf("first retry after %s, want 5ms", d)
	}
	if d := rl.When(r); d != 10*time.Millisecond {
		t.Fatalf("second retry after %s, want 10ms", d)
	}
	if n := rl.NumRequeues(r); n != 2 {
		t.Fatalf("NumRequeues = %d, want 2", n)
	}
	rl.Forget(r)
	if n := rl.NumRequeues(r); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", n)
	}
	for i := range MemberRetryBurst {
		rl.When(request("a", string(rune(i))))
	}
	if d := rl.When(request("a", "late")); d < 50*time.Millisecond {
		t.Fatalf("a's retry beyond its burst of %d after %s, want about 1/%ds", MemberRetryBurst, d, MemberRetryRate)
	}
	if d := rl.When(request("b", "w")); d != 5*time.Millisecond {
		t.Fatalf("b's first retry after %s, want 5ms", d)
	}
}
