package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/widgethub/widgethub/internal/fleet"
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
		for _, m := range servers {
			if err := deleteWidgets(ctx, m.client, ns); err != nil {
				logf("clean up: %v", err)
			}
		}
	}()
	for _, m := range servers {
		if err := fleet.CreateWidgets(ctx, m.client, ns, "s", b.shardWidgets, b.writers); err != nil {
			return err
		}
	}
	names, kubeconfigs, err := userRegistrations(servers, "shard", b.shardMembers)
	if err != nil {
		return err
	}
	var res [2]shardResult
	for i, replicas := range []int{1, b.shardReplicas} {
		if res[i], err = b.shardsOf(ctx, replicas, names, kubeconfigs); err != nil {
			return err
		}
		logf("sharding, %d replicas: %s", replicas, res[i])
	}
	b.table.add(rowShardEngage, widgethub, res[0].String()+"; "+res[1].String(), durationKey(res[1].engaged),
		res[1].maxMemberHeap <= 1.5*res[0].maxMemberHeap/float64(b.shardReplicas))
	return nil
}

// shardResult is one measurement of shards.
type shardResult struct {
	replicas int
	engaged  time.Duration
	// heap, heap0 and rss are each replica's heap in use with and without
	// members, and its RSS, in bytes.
	heap, heap0, rss []int64
	owned            []int
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

func (b *benchmark) shardsOf(ctx context.Context, replicas int, names []string, kubeconfigs [][]byte) (res shardResult, err error) {
	res.replicas = replicas
	var procs []*managerProcess
	defer func() {
		for _, p := range procs {
			b.stop(p, fmt.Sprintf("sharding, %d replicas", replicas))
		}
		err = errors.Join(err, b.unregisterAll(ctx))
	}()
	for i := range replicas {
		id := fmt.Sprintf("replica-%d", i+1)
		args := append([]string{"-hub-kubeconfig", b.hubKubeconfig, "-replica-id", id}, b.managerArgs...)
		p, err := startManager(widgethub, fmt.Sprintf("%s/sharding-%d-%s.log", b.logDir, replicas, id), args)
		if err != nil {
			return res, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := p.waitReady(ctx); err != nil {
			return res, err
		}
	}
	time.Sleep(b.settle)
	for _, p := range procs {
		h, err := p.heapInUse(ctx)
		if err != nil {
			return res, err
		}
		res.heap0 = append(res.heap0, h)
	}
	start := time.Now()
	for i, name := range names {
		if err := b.register(ctx, name, kubeconfigs[i]); err != nil {
			return res, err
		}
	}
	deadline := start.Add(b.window)
	for {
		total := 0
		res.owned = res.owned[:0]
		for _, p := range procs {
			n, err := p.engaged(ctx, names)
			if err != nil {
				return res, err
			}
			res.owned = append(res.owned, n)
			total += n
		}
		if total == len(names) {
			break
		}
		if total > len(names) {
			return res, fmt.Errorf("%d replicas engaged %d of %d members: some twice", replicas, total, len(names))
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d replicas engaged %d of %d members within %s", replicas, total, len(names), b.window)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.engaged = time.Since(start)
	time.Sleep(b.settle)
	for i, p := range procs {
		h, err := p.heapInUse(ctx)
		if err != nil {
			return res, err
		}
		rss, err := p.rss()
		if err != nil {
			return res, err
		}
		res.heap, res.rss = append(res.heap, h), append(res.rss, rss)
		res.maxMemberHeap = max(res.maxMemberHeap, float64(h-res.heap0[i]))
	}
	return res, nil
}
