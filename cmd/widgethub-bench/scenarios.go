package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
)

// engage measures the time from a registration Secret's creation to the first
// reconciled Widget of a member that holds EngageWidgets Widgets, with the
// manager already running; the median of EngageRounds rounds, each a new
// registration of freshly created Widgets.
func (b *benchmark) engage(ctx context.Context) error {
	const ns = "engage"
	m := b.members[0]
	for _, impl := range b.impls {
		p, err := b.startManager(impl, "engage")
		if err != nil {
			return err
		}
		var samples []Sample
		err = func() error {
			if err := p.waitReady(ctx); err != nil {
				return err
			}
			for round := range b.EngageRounds {
				s, err := b.engageOnce(ctx, p, m, ns, fmt.Sprintf("engage-%d", round))
				if err != nil {
					return err
				}
				samples = append(samples, s)
			}
			return nil
		}()
		if stopErr := p.stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return err
		}
		median, _ := Percentile(samples, 50)
		logf("engage latency, %s: %s", impl, median)
		b.table.set(rowEngage, impl, median.String(), impl == widgethub && !median.AtLeast && median.Value < 500*time.Millisecond)
		if err := b.unregisterAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (b *benchmark) engageOnce(ctx context.Context, p *managerProcess, m member, ns, name string) (Sample, error) {
	defer func() {
		if err := DeleteWidgets(ctx, m.client, ns); err != nil {
			logf("clean up %s: %v", ns, err)
		}
	}()
	if err := fleet.CreateWidgets(ctx, m.client, ns, "engage", b.EngageWidgets, b.Writers); err != nil {
		return Sample{}, err
	}
	tracker, err := NewTracker(ctx, m.Config, clusters.NewScheme(), ns)
	if err != nil {
		return Sample{}, err
	}
	defer tracker.Stop()
	if n := tracker.Reconciled(ns); n != 0 {
		return Sample{}, fmt.Errorf("%d Widgets reconciled before their member was registered", n)
	}
	window := b.window(p.impl)
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	start := time.Now()
	if err := b.register(ctx, name, m.Kubeconfig); err != nil {
		return Sample{}, err
	}
	at, err := tracker.WaitReconciled(wctx, ns, 1)
	sample := Sample{Value: at.Sub(start)}
	if err != nil {
		if ctx.Err() != nil || p.impl == widgethub {
			return Sample{}, err
		}
		sample = Sample{Value: window, Unfinished: true}
	}
	if err := b.unregisterAll(ctx); err != nil {
		return Sample{}, err
	}
	// Wait for the member to be disengaged before its Widgets go.
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := p.engaged(ctx, []string{name})
		if err != nil {
			return Sample{}, err
		}
		if n == 0 {
			return sample, nil
		}
		if time.Now().After(deadline) {
			return Sample{}, fmt.Errorf("%s did not disengage %s within a minute", p.impl, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fairness floods one member while single Widgets of a quiet member change,
// and measures the API server's own write ceiling on the flooded member before
// and after the floods. Throughput is compared with the higher 8-writer
// ceiling of the two, the harder comparison.
func (b *benchmark) fairness(ctx context.Context) error {
	flooded, quiet := b.members[0], b.members[1]
	if err := b.measureCeiling(ctx, flooded); err != nil {
		return err
	}
	rates := map[string]floodRates{}
	for _, impl := range b.impls {
		r, err := b.fairnessOf(ctx, impl, flooded, quiet)
		if err != nil {
			return err
		}
		rates[impl] = r
	}
	if err := b.measureCeiling(ctx, flooded); err != nil {
		return err
	}
	ceiling8 := 0.0
	for _, c := range b.ceiling {
		ceiling8 = max(ceiling8, c[1])
	}
	for impl, r := range rates {
		throughput := fmt.Sprintf("%.0f (%.0f%% of 8-writer ceiling)", r.controller, 100*r.controller/ceiling8)
		if r.onceCreated > 0 {
			throughput += fmt.Sprintf("; %.0f (%.0f%%) once created", r.onceCreated, 100*r.onceCreated/ceiling8)
		}
		b.table.set(rowThroughput, impl, throughput, impl == widgethub && r.controller >= ceiling8/2)
		b.table.set(rowServerWrites, impl, fmt.Sprintf("%.0f (%.0f%% of 8-writer ceiling)", r.all, 100*r.all/ceiling8), false)
	}
	return nil
}

// measureCeiling measures the API server's merge-patches/s with 1 and with
// Writers writers and appends them to b.ceiling.
func (b *benchmark) measureCeiling(ctx context.Context, m member) error {
	var c [2]float64
	for i, writers := range []int{1, b.Writers} {
		rate, err := PatchCeiling(ctx, m.client, "ceiling", writers, b.CeilingFor)
		if err != nil {
			return err
		}
		c[i] = rate
		logf("API server ceiling, %d writers: %.0f patches/s", writers, rate)
	}
	b.ceiling = append(b.ceiling, c)
	return DeleteWidgets(ctx, m.client, "ceiling")
}

// floodRates are a flood's writes/s to the flooded API server: the
// controller's, the controller's once every Widget was created (zero when the
// flood did not drain), and everyone's.
type floodRates struct {
	controller, onceCreated, all float64
}

func (b *benchmark) fairnessOf(ctx context.Context, impl string, flooded, quiet member) (rates floodRates, err error) {
	const floodNS, quietNS = "flood", "quiet"
	defer func() {
		err = errors.Join(err, b.unregisterAll(ctx),
			DeleteWidgets(ctx, flooded.client, floodNS), DeleteWidgets(ctx, quiet.client, quietNS))
	}()
	if err := fleet.CreateWidgets(ctx, quiet.client, quietNS, QuietPrefix, b.QuietWidgets, b.Writers); err != nil {
		return rates, err
	}
	scheme := clusters.NewScheme()
	floodTracker, err := NewTracker(ctx, flooded.Config, scheme, floodNS)
	if err != nil {
		return rates, err
	}
	defer floodTracker.Stop()
	quietTracker, err := NewTracker(ctx, quiet.Config, scheme, quietNS)
	if err != nil {
		return rates, err
	}
	defer quietTracker.Stop()
	writes, err := NewWriteCounter(flooded.Config)
	if err != nil {
		return rates, err
	}

	p, err := b.startManager(impl, "fairness")
	if err != nil {
		return rates, err
	}
	defer func() { err = errors.Join(err, p.stop()) }()
	if err := p.waitReady(ctx); err != nil {
		return rates, err
	}
	names := []string{"flooded", "quiet"}
	for i, m := range []member{flooded, quiet} {
		if err := b.register(ctx, names[i], m.Kubeconfig); err != nil {
			return rates, err
		}
	}
	if err := waitEngaged(ctx, p, names, 2*time.Minute); err != nil {
		return rates, err
	}
	engaged, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := quietTracker.WaitReconciled(engaged, quietNS, b.QuietWidgets); err != nil {
		return rates, err
	}

	flood := Flood{
		Flooded: flooded.client, Quiet: quiet.client,
		FloodTracker: floodTracker, QuietTracker: quietTracker,
		FloodNamespace: floodNS, Widgets: b.FloodWidgets, Writers: b.Writers,
		QuietNamespace: quietNS, QuietWidgets: b.QuietWidgets, ChangeEvery: b.ChangeEvery,
		Window: b.window(impl), Writes: writes,
	}
	baseline, err := flood.Baseline(ctx, b.BaselineChanges)
	if err != nil {
		return rates, fmt.Errorf("changes without a flood: %w", err)
	}
	bp50, _ := Percentile(baseline, 50)
	bp99, _ := Percentile(baseline, 99)
	b.table.set(rowQuietBaseline, impl, fmt.Sprintf("%s / %s (n=%d)", bp50, bp99, len(baseline)), false)
	flood.FirstChange = len(baseline)
	profiled := b.profileAPIServer(ctx, flooded, "apiserver-flooded-"+impl)
	res, err := flood.Run(ctx)
	profiled()
	if err != nil {
		return rates, err
	}
	if res.Drained.IsZero() && impl == widgethub {
		return rates, fmt.Errorf("widgethub reconciled %d of %d flooded Widgets within %s", res.Reconciled, b.FloodWidgets, b.window(impl))
	}

	var patchCalls []Sample
	for _, c := range res.Changes {
		patchCalls = append(patchCalls, Sample{Value: c.Patched.Sub(c.At)})
	}
	pp50, _ := Percentile(patchCalls, 50)
	pp99, _ := Percentile(patchCalls, 99)
	lat := res.Latencies(res.Start.Add(b.window(impl)))
	p50, _ := Percentile(lat, 50)
	p99, _ := Percentile(lat, 99)
	b.table.set(rowFairness, impl, fmt.Sprintf("%s / %s (n=%d; the patch call itself %s / %s)", p50, p99, len(lat), pp50, pp99),
		impl == widgethub && !p99.AtLeast && p99.Value < 100*time.Millisecond)

	drain := res.DrainTime()
	widgetRate := float64(res.Reconciled) / drain.Seconds()
	writeRate := float64(res.Writes.Controller) / drain.Seconds()
	allRate := float64(res.Writes.All) / drain.Seconds()
	if res.Drained.IsZero() {
		b.table.set(rowDrain, impl, fmt.Sprintf(">%s (%d/%d done, %.1f Widgets/s)", FormatDuration(drain), res.Reconciled, b.FloodWidgets, widgetRate), false)
	} else {
		b.table.set(rowDrain, impl, fmt.Sprintf("%s (%.0f Widgets/s)", FormatDuration(drain), widgetRate), false)
	}
	rates = floodRates{controller: writeRate, all: allRate}
	if !res.Drained.IsZero() && res.Created.Before(res.End) {
		rates.onceCreated = float64(res.WritesAfterCreated.Controller) / res.End.Sub(res.Created).Seconds()
	}
	logf("fairness, %s: quiet p50 %s p99 %s; flood %s, %.0f writes/s", impl, p50, p99, FormatDuration(drain), writeRate)
	return rates, nil
}

// memory registers IdleMembers members, each a registration of its own (its
// own user, so its own client, cache and connections), spread over
// IdleServers API servers that hold IdleWidgets Widgets each, and reads the
// manager's heap once they are idle.
func (b *benchmark) memory(ctx context.Context) error {
	const ns = "idle"
	if err := b.ensureMembers(b.IdleServers); err != nil {
		return err
	}
	servers := b.members[:b.IdleServers]
	scheme := clusters.NewScheme()
	var trackers []*Tracker
	defer func() {
		for _, t := range trackers {
			t.Stop()
		}
		for _, m := range servers {
			if err := DeleteWidgets(ctx, m.client, ns); err != nil {
				logf("clean up: %v", err)
			}
		}
	}()
	for _, m := range servers {
		if err := fleet.CreateWidgets(ctx, m.client, ns, "idle", b.IdleWidgets, b.Writers); err != nil {
			return err
		}
		t, err := NewTracker(ctx, m.Config, scheme, ns)
		if err != nil {
			return err
		}
		trackers = append(trackers, t)
	}
	names := make([]string, b.IdleMembers)
	kubeconfigs := make([][]byte, b.IdleMembers)
	for i := range names {
		names[i] = fmt.Sprintf("idle-%02d", i)
		user, err := servers[i%len(servers)].Env.AddUser(envtest.User{Name: names[i], Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return err
		}
		if kubeconfigs[i], err = user.KubeConfig(); err != nil {
			return err
		}
	}

	// A warm-up manager reconciles the Widgets first, so that both managers
	// are measured idle in the same state: nothing to write, no Events kept.
	if err := b.warmUp(ctx, servers, trackers, ns); err != nil {
		return err
	}
	for _, impl := range b.impls {
		if err := b.memoryOf(ctx, impl, names, kubeconfigs); err != nil {
			return err
		}
	}
	return nil
}

// warmUp runs widgethub until the Widgets of servers are reconciled.
func (b *benchmark) warmUp(ctx context.Context, servers []member, trackers []*Tracker, ns string) (err error) {
	p, err := b.startManager(widgethub, "memory-warm-up")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.stop(), b.unregisterAll(ctx)) }()
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	for i, m := range servers {
		if err := b.register(ctx, fmt.Sprintf("warm-up-%02d", i), m.Kubeconfig); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, b.Window)
	defer cancel()
	for _, t := range trackers {
		if _, err := t.WaitReconciled(wctx, ns, b.IdleWidgets); err != nil {
			return err
		}
	}
	return nil
}

func (b *benchmark) memoryOf(ctx context.Context, impl string, names []string, kubeconfigs [][]byte) (err error) {
	p, err := b.startManager(impl, "memory")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.stop(), b.unregisterAll(ctx)) }()
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	time.Sleep(b.Settle)
	heap0, err := p.heapInUse(ctx)
	if err != nil {
		return err
	}
	for i, name := range names {
		if err := b.register(ctx, name, kubeconfigs[i]); err != nil {
			return err
		}
	}
	if err := waitEngaged(ctx, p, names, b.window(impl)); err != nil {
		return err
	}
	time.Sleep(b.Settle)
	heap1, err := p.heapInUse(ctx)
	if err != nil {
		return err
	}
	rss, err := p.rss()
	if err != nil {
		return err
	}
	perMember := float64(heap1-heap0) / float64(len(names))
	b.table.set(rowMemoryPerMember, impl, mib(perMember), impl == widgethub && 100*perMember < 512<<20)
	b.table.set(rowMemoryTotal, impl, fmt.Sprintf("%s heap (%s without members), %s RSS", mib(float64(heap1)), mib(float64(heap0)), mib(float64(rss))), false)
	logf("memory, %s: %s per idle member", impl, mib(perMember))
	return nil
}

func mib(bytes float64) string { return fmt.Sprintf("%.2f MiB", bytes/(1<<20)) }

// converge registers ConvergeMembers members holding ConvergeWidgets new
// Widgets each, then starts the manager and measures until every Widget is
// reconciled.
func (b *benchmark) converge(ctx context.Context) error {
	if err := b.ensureMembers(b.ConvergeMembers); err != nil {
		return err
	}
	for _, impl := range b.impls {
		if err := b.convergeOf(ctx, impl); err != nil {
			return err
		}
	}
	return nil
}

func (b *benchmark) convergeOf(ctx context.Context, impl string) (err error) {
	const ns = "converge"
	members := b.members[:b.ConvergeMembers]
	var trackers []*Tracker
	defer func() {
		for _, t := range trackers {
			t.Stop()
		}
		err = errors.Join(err, b.unregisterAll(ctx))
		for _, m := range members {
			err = errors.Join(err, DeleteWidgets(ctx, m.client, ns))
		}
	}()
	scheme := clusters.NewScheme()
	for i, m := range members {
		if err := fleet.CreateWidgets(ctx, m.client, ns, "converge", b.ConvergeWidgets, b.Writers); err != nil {
			return err
		}
		t, err := NewTracker(ctx, m.Config, scheme, ns)
		if err != nil {
			return err
		}
		trackers = append(trackers, t)
		if err := b.register(ctx, fmt.Sprintf("converge-%02d", i), m.Kubeconfig); err != nil {
			return err
		}
	}

	start := time.Now()
	p, err := b.startManager(impl, "converge")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.stop()) }()
	window := b.window(impl)
	wctx, cancel := context.WithDeadline(ctx, start.Add(window))
	defer cancel()
	var last time.Time
	for _, t := range trackers {
		at, err := t.WaitReconciled(wctx, ns, b.ConvergeWidgets)
		if err != nil {
			break
		}
		if at.After(last) {
			last = at
		}
	}
	total := len(members) * b.ConvergeWidgets
	done := 0
	for _, t := range trackers {
		done += t.Reconciled(ns)
	}
	if done < total {
		if impl == widgethub {
			return fmt.Errorf("widgethub reconciled %d of %d Widgets within %s", done, total, window)
		}
		took := time.Since(start)
		b.table.set(rowConverge, impl, fmt.Sprintf(">%s (%d/%d done, %.1f Widgets/s)", FormatDuration(window), done, total, float64(done)/took.Seconds()), false)
		logf("convergence, %s: %d of %d in %s", impl, done, total, FormatDuration(took))
		return nil
	}
	took := last.Sub(start)
	b.table.set(rowConverge, impl, fmt.Sprintf("%s (%.0f Widgets/s)", FormatDuration(took), float64(total)/took.Seconds()), false)
	logf("convergence, %s: %s", impl, FormatDuration(took))
	return nil
}

// apiServerProfileFor is how long the flooded API server is profiled: the
// first seconds of the flood, from its first create.
const apiServerProfileFor = 20 * time.Second

// profileAPIServer starts a CPU profile of m's API server for
// apiServerProfileFor and returns a function that waits for it and writes it
// to the profile directory as name.pprof. It does nothing when no profile
// directory is set.
func (b *benchmark) profileAPIServer(ctx context.Context, m member, name string) (wait func()) {
	if b.profileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		raw, err := APIServerProfile(ctx, m.Config, apiServerProfileFor)
		if err == nil {
			err = os.WriteFile(filepath.Join(b.profileDir, name+".pprof"), raw, 0o644)
		}
		if err != nil {
			logf("profile of %s's API server: %v", m.Name, err)
		}
	}()
	return func() { <-done }
}
