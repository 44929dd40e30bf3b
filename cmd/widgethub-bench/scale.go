package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/api/v1alpha1"
	"github.com/widgethub/widgethub/internal/fleet"
	"github.com/widgethub/widgethub/providers/members"
	"github.com/widgethub/widgethub/providers/sharding"
)

// scale measures a sharded hub at the size of a fleet: scaleMembers
// registrations, each its own user, served by scaleReplicas replica
// processes. All but one point at scaleServers API servers holding
// scaleWidgets Widgets each; the last is the only registration of an API
// server of its own and is pinned to the replica the bench kills, so that a
// change of its Widget is reconciled only by whoever serves that member.
// Measured: the time from the Secrets created to all engaged; each
// replica's heap and RSS at rest; the hub's writes per second at rest by
// kind, from its audit log; the oldest lastProbeTime; then, after a SIGKILL
// of one replica, the time until its members are served again and until the
// pinned member's Widget change is reconciled.
func (b *benchmark) scale(ctx context.Context, impls []string) error {
	if !slices.Contains(impls, widgethub) {
		return nil
	}
	if err := b.ensureMembers(b.scaleServers + 1); err != nil {
		return err
	}
	servers, alone := b.members[:b.scaleServers], b.members[b.scaleServers]
	defer func() {
		if err := deleteWidgetsOf(ctx, append(slices.Clone(servers), alone), scaleNamespace); err != nil {
			logf("clean up: %v", err)
		}
	}()
	if err := b.createWidgetsOf(ctx, servers, scaleNamespace, "s", b.scaleWidgets); err != nil {
		return err
	}
	if err := fleet.CreateWidgets(ctx, alone.client, scaleNamespace, takeoverWidget, 1, 1); err != nil {
		return err
	}
	most := slices.Max(b.scaleMembers)
	if len(b.scaleUsers) < most {
		names, kubeconfigs, err := userRegistrations(servers, "scale", most-1)
		if err != nil {
			return err
		}
		pinned, pinnedKubeconfig, err := userRegistrations([]member{alone}, "scale-takeover", 1)
		if err != nil {
			return err
		}
		b.scaleUsers, b.scaleKubeconfigs = append(pinned, names...), append(pinnedKubeconfig, kubeconfigs...)
	}
	for _, n := range b.scaleMembers {
		run, err := b.scaleOnce(ctx, n, alone)
		if err != nil {
			return err
		}
		logf("scale, %d members over %d replicas: %s; %s; %s", n, b.scaleReplicas, run.engagedText(), run.restText(), run.takeover)
		b.scaleRuns = append(b.scaleRuns, run)
		b.table.add(rowScale, widgethub, run.engagedText(), durationKey(run.engaged), true)
		b.table.add(rowScaleRest, widgethub, run.restText(), rateKey(run.writesPerSecond()),
			run.stalestProbe <= cmp.Or(b.opts.ProbeRefresh, members.DefaultProbeRefresh)+b.opts.ProbeInterval)
		b.table.add(rowScaleTakeover, widgethub, run.takeover.String(), durationKey(run.takeover.allServed), run.takeover.allServed > 0 && run.takeover.reconciled > 0)
	}
	return nil
}

const (
	// handedOver is what a replica logs for each member it hands over.
	handedOver     = `"msg":"Handed the member over"`
	scaleNamespace = "scale"
	// takeoverWidget is the Widget of the pinned member's API server.
	takeoverWidget = "takeover"
)

// scaleRun is one measurement of the scale scenario.
type scaleRun struct {
	shardResult
	members int
	// created is how long creating the Secrets took.
	created time.Duration
	// handOvers counts the members the replicas handed over to one another
	// until all were engaged (as they saw registrations arrive at different
	// moments, and the fair share grow).
	handOvers int
	// load is the load average when the Secrets were created and at the
	// end of the rest.
	load [2]string
	// rest is how long the hub's writes were counted, and writes how many
	// of each kind (hubWriteKinds) the replicas made meanwhile.
	rest   time.Duration
	writes map[string]int
	// oldestProbe is the oldest lastProbeTime at the end of the rest, as
	// read; stalestProbe the oldest any got during it, from the audit log.
	oldestProbe, stalestProbe time.Duration
	takeover                  takeover
}

func (r scaleRun) engagedText() string {
	heapBase, heapPer, rssBase, rssPer := r.perMember()
	return fmt.Sprintf("%d members: %s (created in %s; %d hand-overs meanwhile); fitted over the replicas: heap %s + %.0f KiB, RSS %s + %.0f KiB per member served; load average %s, then %s",
		r.members, r.shardResult, formatDuration(r.created), r.handOvers, mib(heapBase), heapPer/1024, mib(rssBase), rssPer/1024, r.load[0], r.load[1])
}

// perMember fits each replica's heap and RSS, with and without members,
// against the members it serves.
func (r scaleRun) perMember() (heapBase, heapPer, rssBase, rssPer float64) {
	var heap, rss []point
	for i, n := range r.owned {
		heap = append(heap, point{0, float64(r.heap0[i])}, point{float64(n), float64(r.heap[i])})
		rss = append(rss, point{0, float64(r.rss0[i])}, point{float64(n), float64(r.rss[i])})
	}
	heapBase, heapPer = fitLine(heap)
	rssBase, rssPer = fitLine(rss)
	return heapBase, heapPer, rssBase, rssPer
}

func (r scaleRun) restText() string {
	var kinds []string
	for _, kind := range hubWriteKinds {
		kinds = append(kinds, fmt.Sprintf("%s %.2f/s", kind, float64(r.writes[kind])/r.rest.Seconds()))
	}
	return fmt.Sprintf("%d members: hub writes at rest (over %s, from its audit log) %s; oldest lastProbeTime meanwhile %s old (at the end %s)",
		r.members, formatDuration(r.rest), strings.Join(kinds, ", "), formatDuration(r.stalestProbe), formatDuration(r.oldestProbe))
}

// writesPerSecond are the replicas' writes of every kind at rest, per second.
func (r scaleRun) writesPerSecond() float64 {
	n := 0
	for _, c := range r.writes {
		n += c
	}
	return float64(n) / r.rest.Seconds()
}

// takeover is the take-over of a killed replica's members.
type takeover struct {
	replica string
	// members is how many the killed replica served.
	members int
	// firstServed and allServed are when the first and the last of them were
	// served again by another replica, and reconciled when the pinned
	// member's Widget change, made right after the kill, was reconciled; all
	// from the kill (zero: not within the window).
	firstServed, allServed, reconciled time.Duration
	// timeline is how many of them other replicas served, sampled.
	timeline []servedAt
}

type servedAt struct {
	at     time.Duration
	served int
}

func (t takeover) String() string {
	return fmt.Sprintf("SIGKILL of %s (%d members): first served again after %s, all after %s; the pinned member's Widget change reconciled after %s",
		t.replica, t.members, formatDuration(t.firstServed), formatDuration(t.allServed), formatDuration(t.reconciled))
}

// scaleOnce measures n registrations (the pinned one and n-1 others) over
// scaleReplicas replicas.
func (b *benchmark) scaleOnce(ctx context.Context, n int, alone member) (run scaleRun, err error) {
	run.members, run.replicas = n, b.scaleReplicas
	scenario := fmt.Sprintf("scale, %d members", n)
	names, kubeconfigs := b.scaleUsers[:n], b.scaleKubeconfigs[:n]
	victim := b.scaleReplicas - 1
	run.takeover.replica = replicaName(victim)
	trackers, err := b.trackWidgets(ctx, []member{alone}, scaleNamespace, 0)
	if err != nil {
		return run, err
	}
	defer stopAll(trackers)
	procs, err := b.startReplicas(ctx, b.scaleReplicas, fmt.Sprintf("scale-%d", n))
	defer func() {
		for _, p := range procs {
			b.stop(p, scenario)
		}
		err = errors.Join(err, b.unregisterAll(ctx), b.clearHub(ctx))
	}()
	if err != nil {
		return run, err
	}
	time.Sleep(b.settle)
	if run.heap0, run.rss0, err = memories(ctx, procs); err != nil {
		return run, err
	}
	if err := b.quiesce(ctx, scenario); err != nil {
		return run, err
	}
	run.load[0] = loadAverage()
	start := time.Now()
	// At once, as a fleet registered by automation would be: one writer
	// after another took 121 ms a Secret on the loaded hub, so that the
	// engagement measured the creation.
	err = fleet.Parallel(n, b.writers, func(i int) error {
		secret := registration.NewSecret(b.opts.RegistrationNamespace, names[i], kubeconfigs[i])
		if i == 0 {
			secret.Annotations = map[string]string{registration.PinAnnotation: run.takeover.replica}
		}
		return b.hub.Create(ctx, secret)
	})
	if err != nil {
		return run, err
	}
	run.created = time.Since(start)
	if run.owned, err = b.waitAllEngaged(ctx, procs, names, start, scenario); err != nil {
		return run, err
	}
	engagedAt := time.Now()
	run.engaged = engagedAt.Sub(start)
	for _, p := range procs {
		n, err := p.logged(handedOver)
		if err != nil {
			return run, err
		}
		run.handOvers += n
	}
	logf("%s: all engaged in %s (%v)", scenario, formatDuration(run.engaged), run.owned)

	// At rest: the hub's writes after a settling pause, until a probe
	// refresh and a probe interval have passed, then the probe times.
	restFrom := engagedAt.Add(b.settle)
	restTo := engagedAt.Add(b.restFor)
	time.Sleep(time.Until(restTo))
	run.rest = restTo.Sub(restFrom)
	writes, err := b.fleet.Hub.Writes()
	if err != nil {
		return run, err
	}
	run.writes = b.hubWrites(writes, restFrom, restTo)
	if run.oldestProbe, err = b.oldestProbe(ctx, names); err != nil {
		return run, err
	}
	if run.stalestProbe, err = b.stalestProbe(writes, names, restFrom, restTo); err != nil {
		return run, err
	}
	run.load[1] = loadAverage()
	if run.heap, run.rss, err = memories(ctx, procs); err != nil {
		return run, err
	}
	for i := range procs {
		run.maxMemberHeap = max(run.maxMemberHeap, float64(run.heap[i]-run.heap0[i]))
	}
	run.takeover, err = b.killOne(ctx, procs, victim, names, alone, trackers[0])
	return run, err
}

// killOne kills procs[victim] with SIGKILL, changes the Widget of the pinned
// member (which the victim serves) at once, and measures until the victim's
// members are all served by the others again and that change is reconciled.
func (b *benchmark) killOne(ctx context.Context, procs []*managerProcess, victim int, names []string, alone member, t *tracker) (takeover, error) {
	res := takeover{replica: replicaName(victim)}
	key := types.NamespacedName{Namespace: scaleNamespace, Name: fleet.WidgetName(takeoverWidget, 0)}
	wctx, cancel := context.WithTimeout(ctx, b.window)
	defer cancel()
	if _, err := t.waitFor(wctx, key, 1); err != nil {
		return res, fmt.Errorf("the pinned member's Widget before the kill: %w", err)
	}
	served, err := procs[victim].which(ctx, names)
	if err != nil {
		return res, err
	}
	if !slices.Contains(served, names[0]) {
		return res, fmt.Errorf("%s does not serve %s, the member pinned to it", res.replica, names[0])
	}
	res.members = len(served)
	survivors := slices.Delete(slices.Clone(procs), victim, victim+1)
	if err := procs[victim].kill(); err != nil {
		return res, err
	}
	killed := time.Now()
	// A value of its own in each run, so that every run changes the Widget.
	generation, err := setReplicas(ctx, alone.client, key, int32(2+len(b.scaleRuns)))
	if err != nil {
		return res, err
	}
	reconciled := make(chan time.Time, 1)
	go func() {
		at, err := t.waitFor(wctx, key, generation)
		if err != nil {
			logf("take-over: %v", err)
		}
		reconciled <- at
	}()
	for {
		total := 0
		for _, p := range survivors {
			n, err := p.engaged(ctx, served)
			if err != nil {
				return res, err
			}
			total += n
		}
		at := time.Since(killed)
		res.timeline = append(res.timeline, servedAt{at: at, served: total})
		if total > 0 && res.firstServed == 0 {
			res.firstServed = at
		}
		if total == len(served) {
			res.allServed = at
			break
		}
		if wctx.Err() != nil {
			return res, fmt.Errorf("take-over: %d of %d members of %s served again within %s", total, len(served), res.replica, b.window)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if at := <-reconciled; !at.IsZero() {
		res.reconciled = at.Sub(killed)
	}
	return res, nil
}

// clearHub deletes the MemberClusters and the Leases of sharding that the
// replicas leave behind: the test hub runs no garbage collector to delete
// them with their Secrets, and the next run starts afresh.
func (b *benchmark) clearHub(ctx context.Context) error {
	ns := client.InNamespace(b.opts.RegistrationNamespace)
	return errors.Join(b.hub.DeleteAllOf(ctx, &v1alpha1.MemberCluster{}, ns),
		b.hub.DeleteAllOf(ctx, &coordinationv1.Lease{}, ns, client.HasLabels{sharding.LeaseLabel}))
}

// hubWriteKinds are the kinds of the replicas' writes to the hub that
// hubWriteKind tells apart.
var hubWriteKinds = []string{"heartbeats", "fences", statusWrites, "other"}

// statusWrites is the kind of the MemberCluster status writes.
const statusWrites = "MemberCluster status"

// hubWriteKind is which of hubWriteKinds w is; "" for a write outside
// namespace, which the replicas do not make.
func hubWriteKind(w fleet.Write, namespace string) string {
	switch {
	case w.Namespace != namespace:
		return ""
	case w.Resource == "leases" && strings.HasPrefix(w.Name, "widgethub-replica-"):
		return "heartbeats"
	case w.Resource == "leases":
		return "fences"
	case w.Resource == "memberclusters/status":
		return statusWrites
	}
	return "other"
}

// hubWrites counts the writes of each kind the hub's API server received
// between from and to, from its audit log. The bench itself writes nothing
// to the hub then.
func (b *benchmark) hubWrites(writes []fleet.Write, from, to time.Time) map[string]int {
	counts := map[string]int{}
	for _, w := range writes {
		if w.Received.Before(from) || !w.Received.Before(to) {
			continue
		}
		if kind := hubWriteKind(w, b.opts.RegistrationNamespace); kind != "" {
			counts[kind]++
		}
	}
	return counts
}

// oldestProbe is the age of the oldest status.lastProbeTime among the
// MemberClusters of names; a member never probed counts as an error.
func (b *benchmark) oldestProbe(ctx context.Context, names []string) (time.Duration, error) {
	list := &v1alpha1.MemberClusterList{}
	if err := b.hub.List(ctx, list, client.InNamespace(b.opts.RegistrationNamespace)); err != nil {
		return 0, err
	}
	now := time.Now()
	var oldest time.Duration
	seen := 0
	for _, mc := range list.Items {
		if !slices.Contains(names, mc.Name) {
			continue
		}
		if mc.Status.LastProbeTime == nil {
			return 0, fmt.Errorf("member %s has no lastProbeTime", mc.Name)
		}
		seen++
		oldest = max(oldest, now.Sub(mc.Status.LastProbeTime.Time))
	}
	if seen != len(names) {
		return 0, fmt.Errorf("%d of %d members have a MemberCluster", seen, len(names))
	}
	return oldest, nil
}

// stalestProbe is the oldest any of the MemberClusters of names let their
// status.lastProbeTime get between from and to, as a reader saw it: at rest
// every status write rewrites lastProbeTime (to the second), so it is the
// longest time from a status write, in whole seconds, to the member's next
// one or to to, read from the hub's audit log. Unlike a sample at one
// moment, it catches every member at its oldest.
func (b *benchmark) stalestProbe(writes []fleet.Write, names []string, from, to time.Time) (time.Duration, error) {
	last := map[string]time.Time{}
	for _, name := range names {
		last[name] = time.Time{}
	}
	var stalest time.Duration
	// The audit log is in the order the requests completed, which
	// concurrent writes of one member do not make: sorted by receipt.
	writes = slices.Clone(writes)
	slices.SortFunc(writes, func(a, b fleet.Write) int { return a.Received.Compare(b.Received) })
	for _, w := range writes {
		prev, ok := last[w.Name]
		if !ok || hubWriteKind(w, b.opts.RegistrationNamespace) != statusWrites || w.Code/100 != 2 || !w.Received.Before(to) {
			continue
		}
		if !prev.IsZero() && !w.Received.Before(from) {
			stalest = max(stalest, w.Received.Sub(prev))
		}
		last[w.Name] = w.Received.Truncate(time.Second)
	}
	for name, prev := range last {
		if prev.IsZero() {
			return 0, fmt.Errorf("the hub's audit log shows no status write of MemberCluster %s", name)
		}
		stalest = max(stalest, to.Sub(prev))
	}
	return stalest, nil
}

// point is one measurement of a cost y at x members.
type point struct{ x, y float64 }

// fitLine is the least-squares line y = base + perX·x through points.
func fitLine(points []point) (base, perX float64) {
	var sx, sy, sxx, sxy float64
	for _, p := range points {
		sx, sy, sxx, sxy = sx+p.x, sy+p.y, sxx+p.x*p.x, sxy+p.x*p.y
	}
	n := float64(len(points))
	if d := n*sxx - sx*sx; d != 0 {
		perX = (n*sxy - sx*sy) / d
	}
	return (sy - perX*sx) / n, perX
}
