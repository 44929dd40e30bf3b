package members

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgethub/widgethub/providers/sharding"
)

// Registrations created in a burst are shared among the replicas by a few
// computations of the assignment, at most one every assignEvery, not by one
// per registration (each lists every registration: O(N²) for a burst of
// N); each one asked about before its computation is woken once it is
// decided, and every replica gets its fair share.
func TestBurstOfRegistrationsIsAssignedEveryHundredMilliseconds(t *testing.T) {
	f := newTwoReplicas(t)
	s, ctx, mu := f.sharded, f.sharded.ctx, &f.mu

	const n = 500
	answered := map[string]string{}
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("member-%03d", i)
		reg := f.register(name)
		owner, err := s.owner(ctx, name, &reg)
		if err != nil {
			t.Fatal(err)
		}
		answered[name] = owner
		time.Sleep(time.Millisecond)
	}
	burst := time.Since(start)
	unwoken := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for name, owner := range answered {
			if owner == "" && f.woken[name] == 0 {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); unwoken() > 0 && time.Now().Before(deadline); {
		time.Sleep(assignEvery) // the last computation
	}
	mu.Lock()
	computed := f.lists
	for name, owner := range answered {
		if owner == "" && f.woken[name] == 0 {
			t.Errorf("%s: no owner when asked, and never woken", name)
		}
	}
	mu.Unlock()
	if most := int(burst/assignEvery) + 2; computed > most {
		t.Errorf("%d registrations in %s computed the assignment %d times, want at most %d", n, burst.Round(time.Millisecond), computed, most)
	}

	served := map[string]int{}
	for _, reg := range f.regs {
		owner, err := s.owner(ctx, reg.Owner.GetName(), &reg)
		if err != nil {
			t.Fatal(err)
		}
		served[owner]++
	}
	mu.Lock()
	defer mu.Unlock()
	if f.lists != computed {
		t.Errorf("asked again once decided, the assignment was computed %d more times", f.lists-computed)
	}
	if served["a"] != n/2 || served["b"] != n/2 {
		t.Errorf("served %v, want %d on each of a and b", served, n/2)
	}
}

// A computation owner makes itself, because the timer due for the deferred
// members has not run yet (a loaded machine), is not followed by a second
// one as soon as that timer runs: the members deferred since wait out
// assignEvery, and the timer computes them then.
func TestLateTimerWaitsOutTheInterval(t *testing.T) {
	f := newTwoReplicas(t)
	s := f.sharded
	first := f.register("member-0")
	f.register("member-1")
	if _, err := s.owner(s.ctx, "member-0", &first); err != nil {
		t.Fatal(err)
	}
	// As the timer left it: member-1 deferred, its computation due but late,
	// and the interval since the last computation over.
	s.mu.Lock()
	s.pending, s.due = map[string]bool{"member-1": true}, true
	s.assignedAt = time.Now().Add(-2 * assignEvery)
	s.mu.Unlock()
	reg := f.register("member-2")
	if _, err := s.owner(s.ctx, "member-2", &reg); err != nil {
		t.Fatal(err)
	}
	reg = f.register("member-3")
	if _, err := s.owner(s.ctx, "member-3", &reg); err != nil {
		t.Fatal(err)
	}
	if got := f.computed(); got != 2 {
		t.Fatalf("computed the assignment %d times before the late timer, want 2 (the first and member-2's)", got)
	}

	s.assignPending() // the late timer
	if got := f.computed(); got != 2 {
		t.Errorf("the late timer computed the assignment straight after member-2's (%d computations, want 2); member-3 should wait out %s", got, assignEvery)
	}
	deadline := time.Now().Add(10 * assignEvery)
	for f.wokenCount("member-3") == 0 && time.Now().Before(deadline) {
		time.Sleep(assignEvery / 10)
	}
	if f.wokenCount("member-3") == 0 {
		t.Errorf("member-3 was deferred and never woken")
	}
	if got := f.computed(); got != 3 {
		t.Errorf("computed the assignment %d times, want 3: the late timer's own one after the interval", got)
	}
}

// twoReplicas is replica "a" of two live replicas, with registrations the
// test adds, counting the assignment's computations and the members woken.
type twoReplicas struct {
	sharded *sharded
	mu      sync.Mutex
	regs    []Registration
	lists   int
	woken   map[string]int
}

func newTwoReplicas(t *testing.T) *twoReplicas {
	t.Helper()
	shards, err := sharding.New(sharding.Options{Namespace: "widgethub-system", ReplicaID: "a"}, nil, nil, nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &twoReplicas{woken: map[string]int{}}
	f.sharded = &sharded{shards: shards, ctx: ctx, log: logr.Discard(),
		live: func() []string { return []string{"a", "b"} },
		list: func(context.Context) ([]Registration, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.lists++
			return slices.Clone(f.regs), nil
		},
		wake: func(names ...string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, name := range names {
				f.woken[name]++
			}
		}}
	return f
}

// register adds a registration of the member called name, and returns it.
func (f *twoReplicas) register(name string) Registration {
	reg := Registration{Owner: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.regs = append(f.regs, reg)
	return reg
}

func (f *twoReplicas) computed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

func (f *twoReplicas) wokenCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.woken[name]
}
