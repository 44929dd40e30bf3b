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
		if res[i], err = b.serve(ctx, replicas, names, kubeconfigs, 0); err != nil {
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
	// replicas is the number of sharded replicas, zero for one manager
	// without sharding.
	replicas int
	engaged  time.Duration
	// oldestProbe is the age of the oldest lastProbeTime of the members,
	// read a while after they were engaged (zero: not read).
	oldestProbe time.Duration
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
	served := fmt.Sprintf("%d replica(s)", r.replicas)
	if r.replicas == 0 {
		served = "one manager"
	}
	return fmt.Sprintf("%s: all engaged %s after the Secrets; %s", served, formatDuration(r.engaged), strings.Join(each, ", "))
}

// serve registers names with kubeconfigs for widgethub's manager, as
// replicas sharded processes or, with replicas zero, as one process without
// sharding, and measures the time until all are engaged, then each process's
// heap and RSS once idle, and, with probeAfter set, the age of the oldest
// lastProbeTime probeAfter after the engagement.
func (b *benchmark) serve(ctx context.Context, replicas int, names []string, kubeconfigs [][]byte, probeAfter time.Duration) (res shardResult, err error) {
	res.replicas = replicas
	scenario, logPrefix := fmt.Sprintf("sharding, %d replicas", replicas), fmt.Sprintf("sharding-%d", replicas)
	if replicas == 0 {
		scenario, logPrefix = fmt.Sprintf("scale, %d members", len(names)), fmt.Sprintf("scale-%d", len(names))
	}
	var procs []*managerProcess
	defer func() {
		for _, p := range procs {
			b.stop(p, scenario)
		}
		err = errors.Join(err, b.unregisterAll(ctx))
	}()
	for i := range max(replicas, 1) {
		args := append([]string{"-hub-kubeconfig", b.hubKubeconfig}, b.managerArgs...)
		id := "unsharded"
		if replicas > 0 {
			id = fmt.Sprintf("replica-%d", i+1)
			args = append(args, "-replica-id", id)
		}
		p, err := startManager(widgethub, fmt.Sprintf("%s/%s-%s.log", b.logDir, logPrefix, id), args)
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
		h, rss, err := p.memory(ctx)
		if err != nil {
			return res, err
		}
		res.heap0, res.rss0 = append(res.heap0, h), append(res.rss0, rss)
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
			return res, fmt.Errorf("%s: engaged %d of %d members within %s", scenario, total, len(names), b.window)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.engaged = time.Since(start)
	time.Sleep(b.settle)
	if probeAfter > 0 {
		time.Sleep(time.Until(start.Add(res.engaged + probeAfter)))
		if res.oldestProbe, err = b.oldestProbe(ctx, names); err != nil {
			return res, err
		}
	}
	for i, p := range procs {
		h, rss, err := p.memory(ctx)
		if err != nil {
			return res, err
		}
		res.heap, res.rss = append(res.heap, h), append(res.rss, rss)
		res.maxMemberHeap = max(res.maxMemberHeap, float64(h-res.heap0[i]))
	}
	return res, nil
}
