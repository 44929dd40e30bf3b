package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// spreadCost is what the fleet's API servers and etcds spent per status
// patch under one load, beyond what they spend idle over the same time: the
// patches/s, and per patch their CPU, their threads' runs on a CPU, and the
// etcds' writes to their write-ahead logs (one for each batch of writes
// etcd commits).
type spreadCost struct {
	rate                    float64
	apiserverCPU, etcdCPU   time.Duration
	apiserverRuns, etcdRuns float64
	walWrites               float64
}

// String is the cost as the spread row shows it: the patches/s, then per
// patch the API servers' and the etcds' CPU, their runs, and the WAL writes.
func (c spreadCost) String() string {
	return fmt.Sprintf("%.0f/s, %s + %s, %.1f + %.1f runs, %.2f WAL writes",
		c.rate, formatDuration(c.apiserverCPU), formatDuration(c.etcdCPU), c.apiserverRuns, c.etcdRuns, c.walWrites)
}

// measureSpread measures, with no manager running, what the same writers
// cost the fleet when they all write to one of members and when they are
// spread over all of them, one each. On one machine the members' API
// servers share its CPUs, and a manager that writes to all of them at once
// pays this difference on every write; on a fleet whose members have
// machines of their own it does not.
func (b *benchmark) measureSpread(ctx context.Context, members []member) (one, spread spreadCost, err error) {
	const ns = "spread"
	writers := len(members)
	clients := make([]client.Client, len(members))
	for i, m := range members {
		clients[i] = m.client
	}
	defer func() {
		for _, c := range clients {
			err = errors.Join(err, deleteWidgets(ctx, c, ns))
		}
	}()
	prefix, err := createPatchTargets(ctx, clients, ns, writers)
	if err != nil {
		return one, spread, err
	}
	// As before a cold start: the members just started, or the last
	// repetition's Widgets just deleted, are not idle yet.
	if err := b.quiesce(ctx, "spread of writes"); err != nil {
		return one, spread, err
	}
	idle, err := fleetCPUOver(func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.ceilingFor):
			return nil
		}
	})
	if err != nil {
		return one, spread, err
	}
	costs := make([]spreadCost, 2)
	for i, on := range [][]client.Client{clients[:1], clients} {
		var rate float64
		walBefore, err := walWrites(ctx, members)
		if err != nil {
			return one, spread, err
		}
		start := time.Now()
		spent, err := fleetCPUOver(func() (err error) {
			rate, err = patchStatuses(ctx, on, ns, prefix, writers, b.ceilingFor)
			return err
		})
		if err != nil {
			return one, spread, err
		}
		took := time.Since(start)
		walAfter, err := walWrites(ctx, members)
		if err != nil {
			return one, spread, err
		}
		patches := rate * took.Seconds()
		// What the fleet spends idle over the same time is not the patches'.
		idleShare := float64(took) / float64(b.ceilingFor)
		perPatch := func(spent, idle float64) float64 { return (spent - idleShare*idle) / patches }
		costs[i] = spreadCost{
			rate:          rate,
			apiserverCPU:  time.Duration(perPatch(float64(spent.apiservers), float64(idle.apiservers))),
			etcdCPU:       time.Duration(perPatch(float64(spent.etcds), float64(idle.etcds))),
			apiserverRuns: perPatch(float64(spent.apiserverRuns), float64(idle.apiserverRuns)),
			etcdRuns:      perPatch(float64(spent.etcdRuns), float64(idle.etcdRuns)),
			walWrites:     (walAfter - walBefore) / patches,
		}
	}
	logf("spread, %d writers: idle fleet %s + %s in %s; on 1 member %s; one on each of %d members %s",
		writers, formatDuration(idle.apiservers), formatDuration(idle.etcds), formatDuration(b.ceilingFor), costs[0], len(members), costs[1])
	return costs[0], costs[1], nil
}

// fleetCPUOver is the fleet's CPU time spent while work ran.
func fleetCPUOver(work func() error) (fleetCPU, error) {
	before, err := readFleetCPU()
	if err != nil {
		return fleetCPU{}, err
	}
	if err := work(); err != nil {
		return fleetCPU{}, err
	}
	after, err := readFleetCPU()
	return after.sub(before), err
}

// walWriteCount is the etcd metric that counts its writes to the
// write-ahead log.
const walWriteCount = "etcd_disk_wal_write_duration_seconds_count "

// walWrites sums, over the etcds of members, their writes to the
// write-ahead log so far, from each etcd's own /metrics.
func walWrites(ctx context.Context, members []member) (float64, error) {
	var total float64
	for _, m := range members {
		u := m.Env.ControlPlane.Etcd.URL.JoinPath("metrics")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, fmt.Errorf("read etcd metrics of %s: %w", m.Name, err)
		}
		n, err := parseWALWrites(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("etcd metrics of %s: %w", m.Name, err)
		}
		total += n
	}
	return total, nil
}

// parseWALWrites reads walWriteCount's value from an etcd's metrics.
func parseWALWrites(metrics io.Reader) (float64, error) {
	sc := bufio.NewScanner(metrics)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), walWriteCount); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s", strings.TrimSpace(walWriteCount))
}
