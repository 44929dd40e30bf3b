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
	shards, err := sharding.New(sharding.Options{Namespace: "widgethub-system", ReplicaID: "a"}, nil, nil, nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var regs []Registration
	lists := 0
	woken := map[string]int{}
	s := &sharded{shards: shards, ctx: ctx, log: logr.Discard(),
		live: func() []string { return []string{"a", "b"} },
		list: func(context.Context) ([]Registration, error) {
			mu.Lock()
			defer mu.Unlock()
			lists++
			return slices.Clone(regs), nil
		},
		wake: func(names ...string) {
			mu.Lock()
			defer mu.Unlock()
			for _, name := range names {
				woken[name]++
			}
		}}

	const n = 500
	answered := map[string]string{}
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("member-%03d", i)
		reg := Registration{Owner: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}}
		mu.Lock()
		regs = append(regs, reg)
		mu.Unlock()
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
			if owner == "" && woken[name] == 0 {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); unwoken() > 0 && time.Now().Before(deadline); {
		time.Sleep(assignEvery) // the last computation
	}
	mu.Lock()
	computed := lists
	for name, owner := range answered {
		if owner == "" && woken[name] == 0 {
			t.Errorf("%s: no owner when asked, and never woken", name)
		}
	}
	mu.Unlock()
	if most := int(burst/assignEvery) + 2; computed > most {
		t.Errorf("%d registrations in %s computed the assignment %d times, want at most %d", n, burst.Round(time.Millisecond), computed, most)
	}

	served := map[string]int{}
	for _, reg := range regs {
		owner, err := s.owner(ctx, reg.Owner.GetName(), &reg)
		if err != nil {
			t.Fatal(err)
		}
		served[owner]++
	}
	mu.Lock()
	defer mu.Unlock()
	if lists != computed {
		t.Errorf("asked again once decided, the assignment was computed %d more times", lists-computed)
	}
	if served["a"] != n/2 || served["b"] != n/2 {
		t.Errorf("served %v, want %d on each of a and b", served, n/2)
	}
}
