package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// shards measures the same shardMembers registrations (each its own user,
// spread over shardServers API servers holding shardWidgets Widgets each)
// served by one sharded replica and then by shardReplicas: the time from
// all Secrets created to all members engaged, and each replica's heap and
// RSS once idle. Replicas are processes of their own, so each heap is one
// replica's.
func (b *benchmark) shards(ctx context.Context, impls []string) error {
	if !slices.Contains(impls, widgethub) {
		return nil
	}
	const ns = "shard"
	if err := b.ensureMembers(b.shardServers); err != nil {
		return err
	}
	servers := b.members[:b.shardServers]
	defer func() {
		if err := deleteWidgetsOf(ctx, servers, ns); err != nil {
			logf("clean up: %v", err)
		}
	}()
	if err := b.createWidgetsOf(ctx, servers, ns, "s", b.shardWidgets); err != nil {
		return err
	}
	names, kubeconfigs, err := userRegistrations(servers, "shard", b.shardMembers)
	if err != nil {
		return err
	}
	var res [2]shardResult
	for i, replicas := range []int{1, b.shardReplicas} {
		if res[i], err = b.serve(ctx, replicas, names, kubeconfigs); err != nil {
			return err
		}
		logf("sharding, %d replicas: %s", replicas, res[i])
	}
	b.table.add(rowShardEngage, widgethub, res[0].String()+"; "+res[1].String(), durationKey(res[1].engaged),
		res[1].maxMemberHeap <= 1.5*res[0].maxMemberHeap/float64(b.shardReplicas))
	return nil
}

// shardResult is one measurement of serve.
type shardResult struct {
	// replicas is the number of sharded replicas.
	replicas int
	engaged  time.Duration
	// heap, heap0, rss and rss0 are each replica's heap in use and RSS with
	// and without members, in bytes.
	heap, heap0, rss, rss0 []int64
	owned                  []int
	// maxMemberHeap is the largest heap a replica's members take.
	maxMemberHeap float64
}

func (r shardResult) String() string {
	var each []string
	for i := range r.heap {
		each = append(each, fmt.Sprintf("%d members %s heap (%s for members) %s RSS", r.owned[i],
			mib(float64(r.heap[i])), mib(float64(r.heap[i]-r.heap0[i])), mib(float64(r.rss[i]))))
	}
	return fmt.Sprintf("%d replica(s): all engaged %s after the Secrets; %s", r.replicas, formatDuration(r.engaged), strings.Join(each, ", "))
}

// serve registers names with kubeconfigs for widgethub's manager as
// replicas sharded processes, and measures the time until all are engaged,
// then each process's heap and RSS once idle.
func (b *benchmark) serve(ctx context.Context, replicas int, names []string, kubeconfigs [][]byte) (res shardResult, err error) {
	res.replicas = replicas
	scenario := fmt.Sprintf("sharding, %d replicas", replicas)
	procs, err := b.startReplicas(ctx, replicas, fmt.Sprintf("sharding-%d", replicas))
	defer func() {
		for _, p := range procs {
			b.stop(p, scenario)
		}
		err = errors.Join(err, b.unregisterAll(ctx))
	}()
	if err != nil {
		return res, err
	}
	time.Sleep(b.settle)
	if res.heap0, res.rss0, err = memories(ctx, procs); err != nil {
		return res, err
	}
	start := time.Now()
	for i, name := range names {
		if err := b.register(ctx, name, kubeconfigs[i]); err != nil {
			return res, err
		}
	}
	if res.owned, err = b.waitAllEngaged(ctx, procs, names, start, scenario); err != nil {
		return res, err
	}
	res.engaged = time.Since(start)
	time.Sleep(b.settle)
	if res.heap, res.rss, err = memories(ctx, procs); err != nil {
		return res, err
	}
	for i := range procs {
		res.maxMemberHeap = max(res.maxMemberHeap, float64(res.heap[i]-res.heap0[i]))
	}
	return res, nil
}

// startReplicas starts replicas sharded widgethub processes, replica-1 to
// replica-N, their logs named after logPrefix, and waits until they are
// ready. On error it returns those that started, for the caller to stop.
func (b *benchmark) startReplicas(ctx context.Context, replicas int, logPrefix string) ([]*managerProcess, error) {
	var procs []*managerProcess
	for i := range replicas {
		id := replicaName(i)
		args := append([]string{"-hub-kubeconfig", b.hubKubeconfig, "-replica-id", id}, b.managerArgs...)
		p, err := startManager(widgethub, fmt.Sprintf("%s/%s-%s.log", b.logDir, logPrefix, id), args)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := p.waitReady(ctx); err != nil {
			return procs, err
		}
	}
	return procs, nil
}

func replicaName(i int) string { return fmt.Sprintf("replica-%d", i+1) }

// waitAllEngaged waits, until b.window after start, for every one of names
// to be engaged by exactly one of procs, and returns how many each engaged.
func (b *benchmark) waitAllEngaged(ctx context.Context, procs []*managerProcess, names []string, start time.Time, scenario string) ([]int, error) {
	deadline := start.Add(b.window)
	for {
		total := 0
		owned := make([]int, 0, len(procs))
		for _, p := range procs {
			n, err := p.engaged(ctx, names)
			if err != nil {
				return nil, err
			}
			owned = append(owned, n)
			total += n
		}
		switch {
		case total == len(names):
			return owned, nil
		case total > len(names):
			return nil, fmt.Errorf("%s: %d replicas engaged %d of %d members: some twice", scenario, len(procs), total, len(names))
		case time.Now().After(deadline):
			return nil, fmt.Errorf("%s: engaged %d of %d members within %s", scenario, total, len(names), b.window)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// memories are the heap in use (after GC) and the RSS of each of procs.
func memories(ctx context.Context, procs []*managerProcess) (heap, rss []int64, err error) {
	for _, p := range procs {
		h, r, err := p.memory(ctx)
		if err != nil {
			return nil, nil, err
		}
		heap, rss = append(heap, h), append(rss, r)
	}
	return heap, rss, nil
}
