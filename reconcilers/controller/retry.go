package controller

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// Retries of failed reconciles. controller-runtime's default for a
// controller on a priority queue (v0.24) backs each request off on its own
// (5ms doubling to 1000s) without client-go's overall bucket (10/s, burst
// 100): a member that fails every write has each of its Widgets retried at
// 5ms, 10ms, 20ms... at once, a burst of hub CPU the other members pay for.
// The controller keeps the per-request backoff and adds a bucket per member:
// one member's retries wait for its own budget, never another's.
const (
	// MemberRetryRate and MemberRetryBurst are the budget of one member's retries.
	MemberRetryRate  = 10
	MemberRetryBurst = 100
)

// retryRateLimiter delays a failed request by the larger of its own
// exponential backoff and its member's retry budget.
func retryRateLimiter() workqueue.TypedRateLimiter[mcreconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](5*time.Millisecond, 1000*time.Second),
		newMemberBudget(MemberRetryRate, MemberRetryBurst),
	)
}

// memberBudget is a token bucket per member. A member's bucket goes once it
// is full again, so members that come and go leave nothing behind.
type memberBudget struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	members map[multicluster.ClusterName]*rate.Limiter
}

var _ workqueue.TypedRateLimiter[mcreconcile.Request] = (*memberBudget)(nil)

func newMemberBudget(perSecond float64, burst int) *memberBudget {
	return &memberBudget{limit: rate.Limit(perSecond), burst: burst, members: map[multicluster.ClusterName]*rate.Limiter{}}
}

// When takes a token from the request's member and returns how long the
// request must wait for it.
func (b *memberBudget) When(req mcreconcile.Request) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.members[req.ClusterName]
	if l == nil {
		b.forgetFull(time.Now())
		l = rate.NewLimiter(b.limit, b.burst)
		b.members[req.ClusterName] = l
	}
	return l.Reserve().Delay()
}

// forgetFull drops the buckets that are full; b.mu is held.
func (b *memberBudget) forgetFull(now time.Time) {
	for name, l := range b.members {
		if l.TokensAt(now) >= float64(b.burst) {
			delete(b.members, name)
		}
	}
}

// Forget does nothing: the budget is the member's, not the request's.
func (b *memberBudget) Forget(mcreconcile.Request) {}

// NumRequeues is zero: the per-request backoff counts requeues.
func (b *memberBudget) NumRequeues(mcreconcile.Request) int { return 0 }
