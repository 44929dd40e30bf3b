package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/internal/fleet"
)

// engage measures the time from a registration Secret's creation to the first
// reconciled Widget of a member that holds engageWidgets Widgets, with the
// manager already running; the median of engageRounds rounds, each a new
// registration of freshly created Widgets.
func (b *benchmark) engage(ctx context.Context, impls []string) error {
	const ns = "engage"
	m := b.members[0]
	for _, impl := range impls {
		p, err := b.readyManager(ctx, impl, "engage")
		if err != nil {
			return err
		}
		var samples []sample
		err = func() error {
			for round := range b.engageRounds {
				s, err := b.engageOnce(ctx, p, m, ns, fmt.Sprintf("engage-%d", round))
				if err != nil {
					return err
				}
				samples = append(samples, s)
			}
			return nil
		}()
		b.stop(p, "engage")
		if err != nil {
			return err
		}
		median, _ := percentile(samples, 50)
		logf("engage latency, %s: %s", impl, median)
		b.table.add(rowEngage, impl, median.String(), quantileKey(median), !median.atLeast && median.value < 500*time.Millisecond)
		if err := b.unregisterAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (b *benchmark) engageOnce(ctx context.Context, p *managerProcess, m member, ns, name string) (sample, error) {
	defer func() {
		if err := deleteWidgets(ctx, m.client, ns); err != nil {
			logf("clean up %s: %v", ns, err)
		}
	}()
	trackers, err := b.trackWidgets(ctx, []member{m}, ns, b.engageWidgets)
	if err != nil {
		return sample{}, err
	}
	defer stopAll(trackers)
	t := trackers[0]
	if n := t.reconciled(ns); n != 0 {
		return sample{}, fmt.Errorf("%d Widgets reconciled before their member was registered", n)
	}
	window := b.windowFor(p.impl)
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	start := time.Now()
	if err := b.register(ctx, name, m.Kubeconfig); err != nil {
		return sample{}, err
	}
	at, err := t.waitReconciled(wctx, ns, 1)
	latency := sample{value: at.Sub(start)}
	if err != nil {
		if ctx.Err() != nil || p.impl == widgethub {
			return sample{}, err
		}
		latency = sample{value: window, unfinished: true}
	}
	if err := b.unregisterAll(ctx); err != nil {
		return sample{}, err
	}
	// Wait for the member to be disengaged before its Widgets go.
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := p.engaged(ctx, []string{name})
		if err != nil {
			return sample{}, err
		}
		if n == 0 {
			return latency, nil
		}
		if time.Now().After(deadline) {
			return sample{}, fmt.Errorf("%s did not disengage %s within a minute", p.impl, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// floodSize is one of the floods the bench measures: its Widgets and the
// rows of its quiet-member latency and drain time. The main flood also
// measures the API server's write ceiling and the write rates, and draws
// the chart.
type floodSize struct {
	widgets               int
	fairnessRow, drainRow int
	main                  bool
}

// fairness floods one member with floodWidgets Widgets while single Widgets
// of a quiet member change, and measures the API server's own write ceiling
// on the flooded member before and after the floods. Throughput is compared
// with the higher 8-writer ceiling of the two, the harder comparison.
func (b *benchmark) fairness(ctx context.Context, impls []string) error {
	return b.floodsPlaced(ctx, impls, b.placements, floodSize{widgets: b.floodWidgets, fairnessRow: rowFairness, drainRow: rowDrain, main: true})
}

// largeFlood is fairness with largeFloodWidgets, without the peer at
// client-go's defaults, which does not drain even the main flood in its
// window.
func (b *benchmark) largeFlood(ctx context.Context, impls []string) error {
	impls = slices.DeleteFunc(slices.Clone(impls), func(impl string) bool { return impl == peer })
	places := b.placements
	if !b.largeFloodOwn {
		places = slices.DeleteFunc(slices.Clone(places), func(p placement) bool { return p == own })
	}
	return b.floodsPlaced(ctx, impls, places, floodSize{widgets: b.largeFloodWidgets, fairnessRow: rowFairnessLarge, drainRow: rowDrainLarge})
}

// floodsPlaced measures the flood of size in each of places.
func (b *benchmark) floodsPlaced(ctx context.Context, impls []string, places []placement, size floodSize) error {
	for _, p := range places {
		if err := b.place(p, b.members[:2], size.drainRow); err != nil {
			return err
		}
		if err := b.floods(ctx, impls, size); err != nil {
			return err
		}
		b.logThrottled()
	}
	return nil
}

// floods measures one flood of size by each of impls, in the placement set.
func (b *benchmark) floods(ctx context.Context, impls []string, size floodSize) error {
	flooded, quiet := b.members[0], b.members[1]
	if size.main {
		if err := b.measureCeiling(ctx, flooded); err != nil {
			return err
		}
	}
	floods := map[string]floodOutcome{}
	for _, impl := range impls {
		f, err := b.fairnessOf(ctx, impl, flooded, quiet, size)
		if err != nil {
			return err
		}
		floods[impl] = f
		b.noteWidgethub(impl, f.drain)
	}
	tuned, haveTuned := floods[peerTuned]
	for impl, f := range floods {
		// The drain's target is relative to the tuned peer's in the same
		// repetition; one that did not drain counts as its window.
		met := f.drained && atMostTuned(f.drain, tuned.drain, haveTuned)
		b.table.add(b.row(size.drainRow), impl, f.drainText, durationKey(f.drain), met)
	}
	if !size.main {
		return nil
	}
	if err := b.measureCeiling(ctx, flooded); err != nil {
		return err
	}
	// This repetition's two ceilings, the higher of them.
	ceiling := *b.ceilings()
	ceiling8 := max(ceiling[len(ceiling)-1][1], ceiling[len(ceiling)-2][1])
	for impl, f := range floods {
		r := f.rates
		throughput := fmt.Sprintf("%.0f (%.0f%% of 8-writer ceiling)", r.controller, 100*r.controller/ceiling8)
		if r.onceCreated > 0 {
			throughput += fmt.Sprintf("; %.0f (%.0f%%) once created", r.onceCreated, 100*r.onceCreated/ceiling8)
		}
		b.table.add(b.row(rowThroughput), impl, throughput, rateKey(r.controller), r.controller >= ceiling8/2)
		b.table.add(b.row(rowServerWrites), impl, fmt.Sprintf("%.0f (%.0f%% of 8-writer ceiling)", r.all, 100*r.all/ceiling8), rateKey(r.all), false)
	}
	return nil
}

// measureCeiling measures the API server's merge-patches/s with 1 and with
// writers writers and appends them to the placement's ceilings.
func (b *benchmark) measureCeiling(ctx context.Context, m member) error {
	var c [2]float64
	for i, writers := range []int{1, b.writers} {
		rate, err := patchCeiling(ctx, m.client, "ceiling", writers, b.ceilingFor)
		if err != nil {
			return err
		}
		c[i] = rate
		logf("API server ceiling, %d writers: %.0f patches/s", writers, rate)
	}
	ceilings := b.ceilings()
	*ceilings = append(*ceilings, c)
	return deleteWidgets(ctx, m.client, "ceiling")
}

// floodRates are a flood's writes/s to the flooded API server: the
// controller's, the controller's once every Widget was created (zero when the
// flood did not drain), and everyone's.
type floodRates struct {
	controller, onceCreated, all float64
}

// floodOutcome is one manager's flood: its write rates and its drain time
// (the window, when it did not drain), with the drain row's text.
type floodOutcome struct {
	rates     floodRates
	drain     time.Duration
	drained   bool
	drainText string
}

// fairnessOf measures, with impl's manager, the quiet member's change
// latency without a flood and during a flood of the flooded member, and
// returns the flood's outcome.
func (b *benchmark) fairnessOf(ctx context.Context, impl string, flooded, quiet member, size floodSize) (outcome floodOutcome, err error) {
	const floodNS, quietNS = "flood", "quiet"
	defer func() {
		err = errors.Join(err, b.unbudgeted(func() error {
			return errors.Join(b.unregisterAll(ctx),
				deleteWidgetsOf(ctx, []member{flooded}, floodNS), deleteWidgetsOf(ctx, []member{quiet}, quietNS))
		}))
	}()
	// The members are filled and engaged without the placement's budgets,
	// which the measurement sets again.
	if err := b.liftBudgets(); err != nil {
		return outcome, err
	}
	f, stopTrackers, err := b.newFlood(ctx, impl, flooded, quiet, floodNS, quietNS, size.widgets)
	if err != nil {
		return outcome, err
	}
	defer stopTrackers()
	p, err := b.readyManager(ctx, impl, "fairness")
	if err != nil {
		return outcome, err
	}
	defer b.stop(p, "fairness")
	if err := b.engageFloodMembers(ctx, p, f, flooded, quiet); err != nil {
		return outcome, err
	}

	if err := b.setBudgets(); err != nil {
		return outcome, err
	}
	if err := b.quiesce(ctx, fmt.Sprintf("flood of %s (%s)", impl, b.placement)); err != nil {
		return outcome, err
	}
	baseline, err := f.baseline(ctx, b.baselineChanges)
	if err != nil {
		return outcome, fmt.Errorf("changes without a flood: %w", err)
	}
	bp50, bp99 := p50p99(baseline)
	if size.main {
		b.table.add(b.row(rowQuietBaseline), impl, fmt.Sprintf("%s / %s (n=%d)", bp50, bp99, len(baseline)), quantileKey(bp99), false)
	}
	f.firstChange = len(baseline)
	// Both members' API servers, each file named after its placement too.
	profiledFlooded := b.profileAPIServer(ctx, flooded, fmt.Sprintf("apiserver-flooded-%s-%s-%d", impl, b.placement, size.widgets))
	profiledQuiet := b.profileAPIServer(ctx, quiet, fmt.Sprintf("apiserver-quiet-%s-%s-%d", impl, b.placement, size.widgets))
	res, err := f.run(ctx)
	profiledFlooded()
	profiledQuiet()
	if err != nil {
		return outcome, err
	}
	if res.drained.IsZero() && impl == widgethub {
		return outcome, fmt.Errorf("widgethub reconciled %d of %d flooded Widgets within %s", res.reconciled, size.widgets, b.windowFor(impl))
	}
	p50, p99 := b.recordFairness(impl, res, b.row(size.fairnessRow))
	if size.main {
		b.recordQuietSplit(impl, res)
	}
	if size.main && b.placement == colocated {
		b.traces = append(b.traces, traceOf(impl, res, res.start.Add(b.windowFor(impl))))
	}
	outcome = b.floodOutcome(res, size.widgets)
	logf("fairness, %s, %s, %d Widgets: quiet p50 %s p99 %s; flood %s, %.0f writes/s", impl, b.placement, size.widgets, p50, p99, formatDuration(outcome.drain), outcome.rates.controller)
	return outcome, nil
}

// newFlood creates the quiet member's Widgets, starts a tracker of each
// member and returns the flood of impl's measurement with a function that
// stops the trackers.
func (b *benchmark) newFlood(ctx context.Context, impl string, flooded, quiet member, floodNS, quietNS string, widgets int) (f flood, stopTrackers func(), err error) {
	if err := fleet.CreateWidgets(ctx, quiet.client, quietNS, quietPrefix, b.quietWidgets, b.writers); err != nil {
		return f, nil, err
	}
	scheme := clusters.NewScheme()
	floodTracker, err := newTracker(ctx, flooded.Config, scheme, floodNS)
	if err != nil {
		return f, nil, err
	}
	quietTracker, err := newTracker(ctx, quiet.Config, scheme, quietNS)
	if err != nil {
		floodTracker.stop()
		return f, nil, err
	}
	quietRollouts, err := newRolloutTracker(ctx, quiet.Config, scheme, quietNS)
	if err != nil {
		stopAll([]*tracker{quietTracker, floodTracker})
		return f, nil, err
	}
	stopTrackers = func() {
		quietRollouts.stop()
		stopAll([]*tracker{quietTracker, floodTracker})
	}
	return flood{
		flooded: flooded.client, quiet: quiet.client,
		floodTracker: floodTracker, quietTracker: quietTracker, quietRollouts: quietRollouts,
		floodNamespace: floodNS, widgets: widgets, writers: b.writers,
		quietNamespace: quietNS, quietWidgets: b.quietWidgets, changeEvery: b.changeEvery,
		window: b.windowFor(impl), writes: flooded.writes,
	}, stopTrackers, nil
}

// engageFloodMembers registers the flooded and the quiet member and waits
// until p has engaged both and reconciled the quiet member's Widgets.
func (b *benchmark) engageFloodMembers(ctx context.Context, p *managerProcess, f flood, flooded, quiet member) error {
	names := []string{"flooded", "quiet"}
	for i, m := range []member{flooded, quiet} {
		if err := b.register(ctx, names[i], m.Kubeconfig); err != nil {
			return err
		}
	}
	if err := waitEngaged(ctx, p, names, 2*time.Minute); err != nil {
		return err
	}
	engaged, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := f.quietTracker.waitReconciled(engaged, f.quietNamespace, f.quietWidgets)
	return err
}

// recordFairness sets impl's row of the quiet member's change latency during
// the flood and returns its p50 and p99.
func (b *benchmark) recordFairness(impl string, res *floodResult, row int) (p50, p99 quantile) {
	var patchCalls []sample
	for _, c := range res.changes {
		patchCalls = append(patchCalls, sample{value: c.patched.Sub(c.at)})
	}
	pp50, pp99 := p50p99(patchCalls)
	lat := res.latencies(res.start.Add(b.windowFor(impl)))
	p50, p99 = p50p99(lat)
	b.table.add(row, impl, fmt.Sprintf("%s / %s (n=%d; the patch call itself %s / %s)", p50, p99, len(lat), pp50, pp99),
		quantileKey(p99), fairEnough(p99, pp99))
	return p50, p99
}

// recordQuietSplit sets impl's row of where the quiet changes' time went
// during the flood, as the bench's watches saw it: the patch call, then from
// its answer until the Widget's Deployment was seen with the new replicas
// (the hub's watch of the Widget, its queue, its reads and the Deployment's
// apply), then until the Widget's status was seen (the status patch). Only
// changes seen at both ends count.
func (b *benchmark) recordQuietSplit(impl string, res *floodResult) {
	var call, toDeployment, toStatus []sample
	for _, c := range res.changes {
		if c.deployed.IsZero() || c.reconciled.IsZero() {
			continue
		}
		call = append(call, sample{value: c.patched.Sub(c.at)})
		toDeployment = append(toDeployment, sample{value: c.deployed.Sub(c.patched)})
		toStatus = append(toStatus, sample{value: c.reconciled.Sub(c.deployed)})
	}
	if len(call) == 0 {
		return
	}
	c50, c99 := p50p99(call)
	d50, d99 := p50p99(toDeployment)
	s50, s99 := p50p99(toStatus)
	b.table.add(b.row(rowQuietSplit), impl, fmt.Sprintf("%s / %s; %s / %s; %s / %s (n=%d of %d)",
		c50, c99, d50, d99, s50, s99, len(call), len(res.changes)), quantileKey(d99), false)
}

// atMostTuned is the rule of the targets relative to the tuned peer in the
// same repetition: v at most tuned, met when the peer was not measured.
func atMostTuned[T time.Duration | float64](v, tuned T, haveTuned bool) bool {
	return !haveTuned || v <= tuned
}

// fairEnough is the target of the quiet member's change latency during a
// flood: a p99 under 100 ms and within twice the p99 of the patch call
// itself, the part of the latency no controller can remove.
func fairEnough(p99, patchP99 quantile) bool {
	return !p99.atLeast && !patchP99.atLeast && p99.value < 100*time.Millisecond && p99.value <= 2*patchP99.value
}

// floodOutcome is the drain time and write rates of a flood of widgets.
func (b *benchmark) floodOutcome(res *floodResult, widgets int) floodOutcome {
	drain := res.drainTime()
	o := floodOutcome{drain: drain, drained: !res.drained.IsZero()}
	widgetRate := float64(res.reconciled) / drain.Seconds()
	if o.drained {
		o.drainText = fmt.Sprintf("%s (%.0f Widgets/s)", formatDuration(drain), widgetRate)
	} else {
		o.drainText = fmt.Sprintf(">%s (%d/%d done, %.1f Widgets/s)", formatDuration(drain), res.reconciled, widgets, widgetRate)
	}
	o.rates = floodRates{
		controller: float64(res.writes.controller) / drain.Seconds(),
		all:        float64(res.writes.all) / drain.Seconds(),
	}
	if o.drained && res.created.Before(res.end) {
		o.rates.onceCreated = float64(res.writesAfterCreated.controller) / res.end.Sub(res.created).Seconds()
	}
	return o
}

// memory registers idleMembers members, each a registration of its own (its
// own user, so its own client, cache and connections), spread over
// idleServers API servers that hold idleWidgets Widgets each, and reads the
// manager's heap once they are idle.
func (b *benchmark) memory(ctx context.Context, impls []string) error {
	const ns = "idle"
	if err := b.ensureMembers(b.idleServers); err != nil {
		return err
	}
	servers := b.members[:b.idleServers]
	var trackers []*tracker
	defer func() {
		stopAll(trackers)
		if err := deleteWidgetsOf(ctx, servers, ns); err != nil {
			logf("clean up: %v", err)
		}
	}()
	trackers, err := b.trackWidgets(ctx, servers, ns, b.idleWidgets)
	if err != nil {
		return err
	}
	names, kubeconfigs, err := userRegistrations(servers, "idle", b.idleMembers)
	if err != nil {
		return err
	}

	// A warm-up manager reconciles the Widgets first, so that both managers
	// are measured idle in the same state: nothing to write, no Events kept.
	if err := b.warmUp(ctx, servers, trackers, ns); err != nil {
		return err
	}
	perMember := map[string]float64{}
	for _, impl := range impls {
		if perMember[impl], err = b.memoryOf(ctx, impl, names, kubeconfigs); err != nil {
			return err
		}
	}
	// The target is relative to the tuned peer's heap in the same repetition.
	tuned, haveTuned := perMember[peerTuned]
	for impl, heap := range perMember {
		met := 100*heap < 512<<20 && atMostTuned(heap, 0.75*tuned, haveTuned)
		b.table.add(rowMemoryPerMember, impl, mib(heap), bytesKey(heap), met)
	}
	return nil
}

// userRegistrations adds n users named prefix-NN spread over servers and
// returns their names and kubeconfigs: n registrations, each its own user,
// so its own client, cache and connections.
func userRegistrations(servers []member, prefix string, n int) (names []string, kubeconfigs [][]byte, err error) {
	names = make([]string, n)
	kubeconfigs = make([][]byte, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", prefix, i)
		user, err := servers[i%len(servers)].Env.AddUser(envtest.User{Name: names[i], Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return nil, nil, err
		}
		if kubeconfigs[i], err = user.KubeConfig(); err != nil {
			return nil, nil, err
		}
	}
	return names, kubeconfigs, nil
}

// warmUp runs widgethub until the Widgets of servers are reconciled.
func (b *benchmark) warmUp(ctx context.Context, servers []member, trackers []*tracker, ns string) (err error) {
	const scenario = "memory-warm-up"
	p, err := b.readyManager(ctx, widgethub, scenario)
	if err != nil {
		return err
	}
	defer func() {
		b.stop(p, scenario)
		err = errors.Join(err, b.unregisterAll(ctx))
	}()
	for i, m := range servers {
		if err := b.register(ctx, fmt.Sprintf("warm-up-%02d", i), m.Kubeconfig); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, b.window)
	defer cancel()
	_, err = waitAllReconciled(wctx, trackers, ns, b.idleWidgets)
	return err
}

// memoryOf returns impl's heap per idle member and records its total memory.
func (b *benchmark) memoryOf(ctx context.Context, impl string, names []string, kubeconfigs [][]byte) (perMember float64, err error) {
	const scenario = "memory"
	p, err := b.readyManager(ctx, impl, scenario)
	if err != nil {
		return 0, err
	}
	defer func() {
		b.stop(p, scenario)
		err = errors.Join(err, b.unregisterAll(ctx))
	}()
	time.Sleep(b.settle)
	heap0, err := p.heapInUse(ctx)
	if err != nil {
		return 0, err
	}
	for i, name := range names {
		if err := b.register(ctx, name, kubeconfigs[i]); err != nil {
			return 0, err
		}
	}
	if err := waitEngaged(ctx, p, names, b.windowFor(impl)); err != nil {
		return 0, err
	}
	time.Sleep(b.settle)
	heap1, rss, err := p.memory(ctx)
	if err != nil {
		return 0, err
	}
	perMember = float64(heap1-heap0) / float64(len(names))
	b.table.add(rowMemoryTotal, impl, fmt.Sprintf("%s heap (%s without members), %s RSS", mib(float64(heap1)), mib(float64(heap0)), mib(float64(rss))), bytesKey(float64(heap1)), false)
	logf("memory, %s: %s per idle member", impl, mib(perMember))
	return perMember, nil
}

func mib(bytes float64) string { return fmt.Sprintf("%.2f MiB", bytes/(1<<20)) }

// converge measures the cold start twice: convergeMembers members holding
// convergeWidgets new Widgets each, and one member holding
// convergeOneWidgets; each time the Widgets and registrations are there
// before the manager starts, which is measured until every Widget is
// reconciled. On one machine the members' API servers share its CPUs: the
// second measurement shows the cost per Widget without a manager's spread
// of writes over many of them, which the first rewards or punishes.
func (b *benchmark) converge(ctx context.Context, impls []string) error {
	if err := b.ensureMembers(b.convergeMembers); err != nil {
		return err
	}
	// Measured co-located, where the cold start's spread costs CPU (run
	// places every scenario co-located before it begins).
	one, spread, err := b.measureSpread(ctx, b.members[:b.convergeMembers])
	if err != nil {
		return err
	}
	b.spreads = append(b.spreads, [2]spreadCost{one, spread})
	for _, c := range []struct {
		row, members, widgets int
	}{
		{rowConverge, b.convergeMembers, b.convergeWidgets},
		{rowConvergeOne, 1, b.convergeOneWidgets},
	} {
		for _, p := range b.placements {
			if err := b.place(p, b.members[:c.members], c.row); err != nil {
				return err
			}
			if err := b.convergeRow(ctx, impls, c.row, c.members, c.widgets); err != nil {
				return err
			}
			b.logThrottled()
		}
	}
	return nil
}

// convergeRow measures the cold start of members holding widgets Widgets
// each, in the placement set, by each of impls.
func (b *benchmark) convergeRow(ctx context.Context, impls []string, row, members, widgets int) error {
	outcomes := map[string]convergence{}
	for _, impl := range impls {
		o, err := b.convergeOf(ctx, impl, b.members[:members], widgets)
		if err != nil {
			return err
		}
		outcomes[impl] = o
		b.noteWidgethub(impl, o.took)
	}
	// The target is relative to the tuned peer's time in the same
	// repetition; one that did not finish counts as its window.
	tuned, haveTuned := outcomes[peerTuned]
	for impl, o := range outcomes {
		met := o.done && atMostTuned(o.took, tuned.took, haveTuned)
		b.table.add(b.row(row), impl, o.text, durationKey(o.took), met)
	}
	return nil
}

// convergence is one manager's cold start: the time until every Widget was
// reconciled (done), or the window that cut it short, with the row's text.
type convergence struct {
	text string
	took time.Duration
	done bool
}

// convergeOf is impl's cold start with members holding widgets new Widgets each.
func (b *benchmark) convergeOf(ctx context.Context, impl string, members []member, widgets int) (c convergence, err error) {
	const ns = "converge"
	var trackers []*tracker
	defer func() {
		stopAll(trackers)
		err = errors.Join(err, b.unbudgeted(func() error {
			return errors.Join(b.unregisterAll(ctx), deleteWidgetsOf(ctx, members, ns))
		}))
	}()
	// The Widgets are made, and deleted, without the placement's budgets.
	if err := b.liftBudgets(); err != nil {
		return c, err
	}
	if trackers, err = b.trackWidgets(ctx, members, ns, widgets); err != nil {
		return c, err
	}
	for i, m := range members {
		if err := b.register(ctx, fmt.Sprintf("converge-%02d", i), m.Kubeconfig); err != nil {
			return c, err
		}
	}

	if err := b.setBudgets(); err != nil {
		return c, err
	}
	if err := b.quiesce(ctx, fmt.Sprintf("cold start of %s (%s)", impl, b.placement)); err != nil {
		return c, err
	}
	writesBefore, err := countMemberWrites(ctx, members)
	if err != nil {
		return c, err
	}
	fleetCPUBefore, err := readFleetCPU()
	if err != nil {
		return c, err
	}
	start := time.Now()
	p, err := b.startManager(impl, "converge")
	if err != nil {
		return c, err
	}
	defer b.stop(p, "converge")
	window := b.windowFor(impl)
	wctx, cancel := context.WithDeadline(ctx, start.Add(window))
	defer cancel()
	// A convergence the window cuts short is reported from the count below.
	last, _ := waitAllReconciled(wctx, trackers, ns, widgets)
	total := len(members) * widgets
	done := 0
	for _, t := range trackers {
		done += t.reconciled(ns)
	}
	if done < total {
		if impl == widgethub {
			return c, fmt.Errorf("widgethub reconciled %d of %d Widgets within %s", done, total, window)
		}
		elapsed := time.Since(start)
		logf("convergence, %s, %s, %d member(s): %d of %d in %s", impl, b.placement, len(members), done, total, formatDuration(elapsed))
		return convergence{text: fmt.Sprintf(">%s (%d/%d done, %.1f Widgets/s)", formatDuration(window), done, total, float64(done)/elapsed.Seconds()), took: elapsed}, nil
	}
	took := last.Sub(start)
	writes, err := countMemberWrites(ctx, members)
	if err != nil {
		return c, err
	}
	writes = writes.sub(writesBefore)
	fleetCPUAfter, err := readFleetCPU()
	if err != nil {
		return c, err
	}
	spent := fleetCPUAfter.sub(fleetCPUBefore)
	managerCPU, err := p.cpu()
	if err != nil {
		return c, err
	}
	logf("convergence, %s, %s, %d member(s): %s; %d controller writes, %d in all (Events included), %d lists, %d gets; CPU: manager %s, API servers and etcds %s (API servers %s, etcds %s); their threads' runs on a CPU per write: API servers %.1f, etcds %.1f",
		impl, b.placement, len(members), formatDuration(took), writes.controller, writes.all, writes.lists, writes.gets, formatDuration(managerCPU),
		formatDuration(spent.total()), formatDuration(spent.apiservers), formatDuration(spent.etcds),
		float64(spent.apiserverRuns)/float64(writes.all), float64(spent.etcdRuns)/float64(writes.all))
	// On one machine the members' API servers share its CPUs with each other
	// and the manager: their CPU per Widget shows what the spread costs.
	perWidget := spent.total() / time.Duration(total)
	return convergence{text: fmt.Sprintf("%s (%.0f Widgets/s; API servers and etcds %s CPU per Widget)",
		formatDuration(took), float64(total)/took.Seconds(), formatDuration(perWidget)), took: took, done: true}, nil
}

// readyManager starts impl's manager process for scenario and waits until
// its hub cache has synced; on error the process is stopped again.
func (b *benchmark) readyManager(ctx context.Context, impl, scenario string) (*managerProcess, error) {
	p, err := b.startManager(impl, scenario)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// trackWidgets creates n Widgets, named after ns, in namespace ns of each of
// members (the members at once) and starts a tracker of ns on each. On
// error it stops the trackers it started.
func (b *benchmark) trackWidgets(ctx context.Context, members []member, ns string, n int) ([]*tracker, error) {
	if err := b.createWidgetsOf(ctx, members, ns, ns, n); err != nil {
		return nil, err
	}
	scheme := clusters.NewScheme()
	var trackers []*tracker
	for _, m := range members {
		t, err := newTracker(ctx, m.Config, scheme, ns)
		if err != nil {
			stopAll(trackers)
			return nil, err
		}
		trackers = append(trackers, t)
	}
	return trackers, nil
}

// waitAllReconciled waits until every one of trackers has seen n Widgets of
// ns reconciled and returns when the last of them was seen: the latest seen
// so far, with the error, when ctx ends first.
func waitAllReconciled(ctx context.Context, trackers []*tracker, ns string, n int) (last time.Time, err error) {
	for _, t := range trackers {
		at, err := t.waitReconciled(ctx, ns, n)
		if err != nil {
			return last, err
		}
		if at.After(last) {
			last = at
		}
	}
	return last, nil
}

func stopAll(trackers []*tracker) {
	for _, t := range trackers {
		t.stop()
	}
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
		raw, err := apiServerProfile(ctx, m.Config, apiServerProfileFor)
		if err == nil {
			err = os.WriteFile(filepath.Join(b.profileDir, name+".pprof"), raw, 0o644)
		}
		if err != nil {
			logf("profile of %s's API server: %v", m.Name, err)
		}
	}()
	return func() { <-done }
}
