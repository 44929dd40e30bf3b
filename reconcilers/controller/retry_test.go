package controller

import (
	"fmt"
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

// The controller's limiter holds the numbers its doc and docs/fault-matrix.md
// state, written here as numbers rather than read from the product: each
// request backs off on its own from 5ms, doubling to 1000s, and Forget starts
// it again; each member has a budget of 100 retries at once, then 10 per
// second, which delays only that member's retries.
func TestRetryBoundsAreTheDocumentedNumbers(t *testing.T) {
	rl := retryRateLimiter()
	w := request("a", "w")
	want := 5 * time.Millisecond
	for n := 1; n <= 20; n++ { // 5ms * 2^18 passes 1000s: the last two are capped
		if d := rl.When(w); d != want {
			t.Fatalf("retry %d of one request after %s, want %s", n, d, want)
		}
		want = min(2*want, 1000*time.Second)
	}
	if want != 1000*time.Second {
		t.Fatalf("backoff not capped within 20 retries: %s", want)
	}
	if n := rl.NumRequeues(w); n != 20 {
		t.Fatalf("NumRequeues = %d, want 20", n)
	}
	rl.Forget(w)
	if d := rl.When(w); d != 5*time.Millisecond {
		t.Fatalf("first retry after Forget after %s, want 5ms", d)
	}

	// A member's budget: 100 requests retried at once wait only their own
	// backoff; the k-th beyond them waits k/10 s, less what refilled since
	// the bucket was made.
	start := time.Now()
	for i := range 100 {
		if d := rl.When(request("storm", fmt.Sprint(i))); d != 5*time.Millisecond {
			t.Fatalf("storm's retry %d within its burst of 100 after %s, want its own 5ms", i+1, d)
		}
	}
	for k := 1; k <= 10; k++ {
		d := rl.When(request("storm", fmt.Sprint("late", k)))
		refilled := time.Since(start)
		if budget := time.Duration(k) * 100 * time.Millisecond; d > budget || d < budget-refilled {
			t.Fatalf("storm's retry %d beyond its burst after %s, want %s less at most the %s that refilled", k, d, budget, refilled)
		}
	}
	if d := rl.When(request("quiet", "w")); d != 5*time.Millisecond {
		t.Fatalf("quiet's first retry after %s behind storm's budget, want 5ms", d)
	}
}
