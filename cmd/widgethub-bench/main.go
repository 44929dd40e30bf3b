// Command widgethub-bench measures widgethub's hub manager against
// multicluster-runtime's kubeconfig provider (the peer) on local API servers
// and prints one table. `make bench` runs it; `make bench-quick` runs the
// small sizes CI uses.
//
// Each row is measured in the same run for both managers, one after the
// other, each in a fresh manager process on the same API servers. A Widget
// counts as reconciled when a watch of its member sees its
// status.observedGeneration reach its generation.
//
// The parts (each in its own file):
// A tracker watches the Widgets of one member with its own informer and
// records, for every Widget, the first time its status reported each
// generation (status.observedGeneration): that is when the Widget counts as
// reconciled. Measuring from outside the manager keeps the measurement the
// same for any implementation of the controller, and the informer's watch
// adds the same small delay to each.
//
// fleet.CreateWidgets and patchCeiling generate load with several writers;
// patchCeiling is the API server's own write ceiling, a plain merge-patch loop
// that every controller's write rate can be compared with. A writeCounter
// reads, from the API server's own metrics, how many writes a controller made
// to the objects it owns. percentile summarises samples some of which may not
// have finished when a measurement window closed.
//
// The package's own test (fairness_test.go, run by make test) asserts the
// fairness of the real operator wiring.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/widgethub/widgethub/api/registration"
	"github.com/widgethub/widgethub/clusters"
	"github.com/widgethub/widgethub/cmd/widgethub/app"
	"github.com/widgethub/widgethub/internal/fleet"
)

// sizes are the measurement's sizes; -quick scales them down.
type sizes struct {
	engageWidgets, engageRounds int
	floodWidgets, quietWidgets  int
	// largeFloodWidgets are the Widgets of the second, larger flood;
	// largeFloodOwn measures it with members of their own CPUs too (-quick
	// leaves that out: the main flood covers the placement at its size).
	largeFloodWidgets int
	largeFloodOwn     bool
	changeEvery       time.Duration
	// baselineChanges are the quiet member's changes measured before the flood.
	baselineChanges                       int
	writers                               int
	ceilingFor                            time.Duration
	idleMembers, idleServers, idleWidgets int
	convergeMembers, convergeWidgets      int
	// convergeOneWidgets are the Widgets of the cold start of one member.
	convergeOneWidgets int
	// shardMembers registrations over shardServers API servers holding
	// shardWidgets Widgets each, served by 1 and by shardReplicas replicas.
	shardMembers, shardServers, shardWidgets, shardReplicas int
	// scaleMembers registrations, each size measured on its own, served by
	// scaleReplicas sharded replicas: all but one over scaleServers API
	// servers holding scaleWidgets Widgets each; the hub's writes are
	// counted, and the probe times read, until restFor after all engaged.
	scaleMembers                              []int
	scaleServers, scaleWidgets, scaleReplicas int
	restFor                                   time.Duration
	// window bounds every widgethub measurement (exceeding it fails the run);
	// peerWindow bounds the peer's flood and convergence, which it does not
	// finish in useful time with client-go's default 5 QPS.
	window, peerWindow time.Duration
	// ownPeerWindow bounds the tuned peer's floods and cold starts on the
	// rows of members with their own CPUs, where they take long; longer
	// when widgethub took longer (see ownPeerWindowFor).
	ownPeerWindow time.Duration
	settle        time.Duration
	// maxQuiesce bounds the wait for the machine to settle before a
	// measured run (see quiesce).
	maxQuiesce time.Duration
	// reps is how many times each scenario is measured.
	reps int
}

// fullSizes are the sizes of `make bench`.
func fullSizes() sizes {
	return sizes{
		engageWidgets: 100, engageRounds: 3,
		floodWidgets: 5000, largeFloodWidgets: 10000, largeFloodOwn: true, quietWidgets: 20, changeEvery: 100 * time.Millisecond, baselineChanges: 50,
		writers:     8,
		ceilingFor:  5 * time.Second,
		idleMembers: 20, idleServers: 4, idleWidgets: 100,
		convergeMembers: 10, convergeWidgets: 1000, convergeOneWidgets: 5000,
		shardMembers: 100, shardServers: 4, shardWidgets: 20, shardReplicas: 3,
		scaleMembers: []int{1000}, scaleServers: 4, scaleWidgets: 20, scaleReplicas: 5, restFor: 75 * time.Second,
		window: 10 * time.Minute, peerWindow: 90 * time.Second, ownPeerWindow: time.Minute,
		settle: 5 * time.Second, maxQuiesce: 90 * time.Second,
		reps: 3,
	}
}

// quickSizes are fullSizes scaled down for CI.
func quickSizes() sizes {
	s := fullSizes()
	s.engageRounds = 1
	s.floodWidgets, s.largeFloodWidgets, s.quietWidgets, s.baselineChanges = 1000, 2000, 10, 20
	s.largeFloodOwn = false
	s.ceilingFor = 2 * time.Second
	s.idleMembers, s.idleServers = 6, 2
	s.convergeMembers, s.convergeWidgets, s.convergeOneWidgets = 3, 200, 600
	s.shardMembers, s.shardServers = 12, 2
	s.scaleMembers, s.scaleServers, s.scaleReplicas, s.restFor = []int{100}, 2, 3, 15*time.Second
	s.window, s.peerWindow, s.ownPeerWindow = 5*time.Minute, 15*time.Second, 30*time.Second
	s.settle, s.maxQuiesce = 2*time.Second, 20*time.Second
	s.reps = 1
	return s
}

var scenarios = []string{"engage", "fairness", "large-flood", "memory", "converge", "sharding", "scale"}

// parseChoices reads a comma-separated flag of choices among known (the
// placements, the scenarios), in the order given, each once. An unknown one
// fails the run before the fleet starts.
func parseChoices[T ~string](text, what string, known []T) ([]T, error) {
	var got []T
	for field := range strings.SplitSeq(text, ",") {
		c := T(strings.TrimSpace(field))
		if !slices.Contains(known, c) {
			names := make([]string, len(known))
			for i, k := range known {
				names[i] = string(k)
			}
			return nil, fmt.Errorf("unknown %s %q (have %s)", what, field, strings.Join(names, ", "))
		}
		if !slices.Contains(got, c) {
			got = append(got, c)
		}
	}
	return got, nil
}

func main() {
	var (
		managerImpl     = flag.String("manager", "", "internal: run this manager (widgethub or peer) as a subprocess of the benchmark")
		hubKubeconfig   = flag.String("hub-kubeconfig", "", "internal: the hub of -manager")
		quick           = flag.Bool("quick", false, "small sizes, for CI (about 11 minutes on 2 CPUs, both placements)")
		only            = flag.String("only", strings.Join(scenarios, ","), "comma-separated scenarios to run: "+strings.Join(scenarios, ", "))
		managers        = flag.String("managers", strings.Join([]string{widgethub, peer, peerTuned}, ","), "comma-separated managers to measure: widgethub, peer (client-go defaults), peer-tuned (widgethub's QPS, burst and workers)")
		reps            = flag.Int("reps", 0, "repetitions of each scenario; each row shows the median and the spread (default 3, quick 1); peer is measured in the first only")
		floodWidgets    = flag.Int("flood", 0, "Widgets of the flood (default 5000, quick 1000)")
		largeFlood      = flag.Int("large-flood", 0, "Widgets of the large flood (default 10000, quick 2000)")
		convergeMembers = flag.Int("converge-members", 0, "members of the cold-start convergence (default 10, quick 3)")
		convergeWidgets = flag.Int("converge-widgets", 0, "Widgets per member of the cold-start convergence (default 1000, quick 200)")
		idleMembers     = flag.Int("idle-members", 0, "idle members of the memory measurement (default 20, quick 6)")
		idleServers     = flag.Int("idle-servers", 0, "API servers the idle members' registrations point at (default 4, quick 2)")
		cpuProfile      = flag.String("cpuprofile", "", "write a CPU profile of each manager process, and of the flooded and the quiet API server during each flood, and a heap profile of a manager each time its heap is read (memory, sharding), to this directory")
		peerWindow      = flag.Duration("peer-window", 0, "how long the peer's flood and convergence are measured (default 90s, quick 15s)")
		shardMembers    = flag.Int("shard-members", 0, "registrations of the sharding measurement (default 100, quick 12)")
		replicaID       = flag.String("replica-id", "", "internal: run -manager widgethub sharded, as this replica")
		chart           = flag.String("chart", "", "where to draw the quiet member's change latency during the floods, .svg or .png (default: fairness.svg beside the manager logs)")
		scaleMembers    = flag.String("scale-members", "", "comma-separated sizes of the scale measurement, each measured on its own (default 1000, quick 100)")
		scaleReplicas   = flag.Int("scale-replicas", 0, "sharded replicas of the scale measurement (default 5, quick 3)")
		chartDir        = flag.String("chart-dir", "", "where to draw the scale charts, heap per replica against members served and the take-over timeline (default: beside the manager logs)")
		placement       = flag.String("placement", "own,colocated", "comma-separated placements of the members' API servers and etcds in the flood and cold-start rows: own (each member under a CPU budget of its own, cgroup v1, as root), colocated (sharing the machine)")
		hubCPUs         = flag.Float64("hub-cpus", 1, "CPUs of the hub's API server, etcd and manager on the rows of members with their own CPUs; the members share the rest")
		planeProcs      = flag.Int("control-plane-gomaxprocs", 1, "GOMAXPROCS of the fleet's kube-apiservers and etcds: 1 fits the budgets of the rows of members with their own CPUs (1 CPU or less each); 0 keeps Go's default (the machine's CPUs, and at least 2 under any budget)")
		ownPeerWindow   = flag.Duration("own-peer-window", 0, "how long the tuned peer's floods and cold starts are measured at least on the rows of members with their own CPUs, longer when widgethub took longer there (default 1m, quick 30s)")
	)
	opts := app.DefaultOptions()
	opts.LeaderElection = false // one manager in-process: no standby to hand over to
	flag.Float64Var(&opts.MemberQPS, "member-qps", opts.MemberQPS, "widgethub's --member-qps")
	flag.IntVar(&opts.MemberBurst, "member-burst", opts.MemberBurst, "widgethub's --member-burst")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", opts.MaxConcurrentReconciles, "widgethub's --max-concurrent-reconciles")
	flag.IntVar(&opts.MaxConcurrentReconcilesPerMember, "max-concurrent-reconciles-per-member", opts.MaxConcurrentReconcilesPerMember, "widgethub's --max-concurrent-reconciles-per-member")
	flag.Parse()

	if *managerImpl != "" {
		opts.Sharding, opts.ReplicaID = *replicaID != "", *replicaID
		if err := runManager(*managerImpl, *hubKubeconfig, *cpuProfile, opts); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}

	s := fullSizes()
	if *quick {
		s = quickSizes()
	}
	setIf(&s.floodWidgets, *floodWidgets)
	setIf(&s.largeFloodWidgets, *largeFlood)
	setIf(&s.convergeMembers, *convergeMembers)
	setIf(&s.convergeWidgets, *convergeWidgets)
	setIf(&s.idleMembers, *idleMembers)
	setIf(&s.idleServers, *idleServers)
	setIf(&s.peerWindow, *peerWindow)
	setIf(&s.ownPeerWindow, *ownPeerWindow)
	setIf(&s.shardMembers, *shardMembers)
	setIf(&s.reps, *reps)
	setIf(&s.scaleReplicas, *scaleReplicas)
	if *scaleMembers != "" {
		var err error
		if s.scaleMembers, err = parseSizes(*scaleMembers); err != nil {
			fmt.Fprintln(os.Stderr, "-scale-members:", err)
			os.Exit(2)
		}
	}
	places, err := parseChoices(*placement, "placement", placements)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-placement:", err)
		os.Exit(2)
	}
	names, err := parseChoices(*only, "scenario", scenarios)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-only:", err)
		os.Exit(2)
	}
	// The charts are drawn after the last row: a directory that cannot be
	// made fails the run now, not after an hour of measuring.
	if *chartDir != "" {
		if err := os.MkdirAll(*chartDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "-chart-dir:", err)
			os.Exit(2)
		}
	}
	managerArgs := []string{
		fmt.Sprintf("-member-qps=%g", opts.MemberQPS),
		fmt.Sprintf("-member-burst=%d", opts.MemberBurst),
		fmt.Sprintf("-max-concurrent-reconciles=%d", opts.MaxConcurrentReconciles),
		fmt.Sprintf("-max-concurrent-reconciles-per-member=%d", opts.MaxConcurrentReconcilesPerMember),
		"-cpuprofile=" + *cpuProfile,
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &benchmark{sizes: s, impls: strings.Split(*managers, ","), managerArgs: managerArgs, opts: opts, profileDir: *cpuProfile,
		enforceTargets: !*quick, chartPath: *chart, chartDir: *chartDir, placements: places, hubCPUs: *hubCPUs, controlPlaneProcs: *planeProcs}
	err = b.run(ctx, names)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseSizes parses comma-separated positive sizes.
func parseSizes(text string) ([]int, error) {
	var sizes []int
	for field := range strings.SplitSeq(text, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive size", field)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// benchmark is one run: a fleet of API servers, the managers to compare and the table.
type benchmark struct {
	sizes
	impls       []string
	managerArgs []string
	opts        app.Options
	profileDir  string
	// enforceTargets makes a missed target fail the run; -quick's sizes
	// keep the bench working and do not judge it.
	enforceTargets bool
	// chartPath is where the fairness chart is drawn, chartDir the scale
	// charts; empty: beside the logs.
	chartPath, chartDir string

	fleet         *fleet.Fleet
	hub           client.Client
	members       []member
	hubKubeconfig string
	logDir        string
	table         table
	// badStops are the managers that stopped badly, and stoppedBadly their impls.
	badStops, stoppedBadly []string
	// quiesced are the waits for the machine to settle before measured runs.
	quiesced []quiesced
	// ceiling is the API server's merge-patches/s with 1 and with writers writers.
	ceiling [][2]float64
	// scaleUsers and scaleKubeconfigs are the scale scenario's registrations,
	// made once for every repetition, the pinned one first; scaleRuns are
	// its measurements, for the charts.
	scaleUsers       []string
	scaleKubeconfigs [][]byte
	scaleRuns        []scaleRun
	// traces are the quiet member's changes during every flood, for the chart.
	traces []floodTrace

	// placements are those of the flood and cold-start rows (placement.go),
	// placement the one being measured; cgroups hold the CPU budgets of
	// own, hubCPUs the hub's. ownMissing says why own was left out.
	placements []placement
	placement  placement
	// placedRow is the row being measured in placement; widgethubTook
	// widgethub's longest time on each own row so far.
	placedRow int
	// placedMembers are the members the placed row uses.
	placedMembers []member
	widgethubTook map[int]time.Duration
	cgroups       *cpuCgroups
	hubCPUs       float64
	ownMissing    string
	// controlPlaneProcs is the GOMAXPROCS the fleet's processes start
	// with (fleet.Options.GOMAXPROCS); zero for Go's default.
	controlPlaneProcs int
	// ownCeiling is ceiling on the rows of members with their own CPUs.
	ownCeiling [][2]float64
	// managerStarts counts the managers started per scenario and impl,
	// which numbers their logs.
	managerStarts map[string]int
	// spreads are measureSpread's costs, one pair per repetition of the
	// cold starts: on one member, spread over the cold start's members.
	spreads [][2]spreadCost
}

// member is one API server of the fleet with a direct, unthrottled client.
type member struct {
	*fleet.ControlPlane
	client client.Client
	// writes counts the writes its API server served.
	writes *writeCounter
}

func (b *benchmark) run(ctx context.Context, only []string) error {
	var err error
	if b.logDir, err = os.MkdirTemp("", "widgethub-bench-"); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(b.logDir, "bench.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	start := time.Now()
	// The cgroups go after the fleet has stopped (deferred before it).
	b.openCgroups()
	defer b.closeCgroups()
	// Two members to begin with; scenarios that need more start them, so
	// that no idle API server takes CPU from the scenarios before them.
	logf("starting a hub and 2 member API servers")
	// The scale scenario counts the hub's writes by kind from its audit log.
	// The fleet's processes get GOMAXPROCS=controlPlaneProcs: under a CPU
	// quota Go runs at least 2 Ps (runtime/cgroup_linux.go), and a member of
	// half a CPU then spent its 10 ms period's quota in 2.5 ms on both CPUs
	// (a garbage collection, requests in parallel) and stalled for the rest
	// of the period, which a member with a machine of its own does not. The
	// managers, started by the bench, keep Go's default.
	b.fleet, err = fleet.Start(fleet.Options{Members: []string{memberName(0), memberName(1)}, Scheme: clusters.NewScheme(),
		AuditHub: slices.Contains(only, "scale"), GOMAXPROCS: b.controlPlaneProcs})
	if err != nil {
		return err
	}
	defer func() {
		if err := b.fleet.Stop(); err != nil {
			logf("stop fleet: %v", err)
		}
	}()
	logf("fleet up in %s", formatDuration(time.Since(start)))
	b.putInCgroup(b.fleet.Hub)
	if b.hub, err = newClient(b.fleet.Hub.Config, clusters.NewScheme()); err != nil {
		return err
	}
	if err := b.addClients(b.fleet.Members); err != nil {
		return err
	}
	if err := fleet.EnsureNamespace(ctx, b.hub, b.opts.RegistrationNamespace); err != nil {
		return err
	}
	b.hubKubeconfig = filepath.Join(b.logDir, "hub.kubeconfig")
	if err := os.WriteFile(b.hubKubeconfig, b.fleet.Hub.Kubeconfig, 0o600); err != nil {
		return err
	}
	b.table.init(b.impls)

	measure := map[string]func(context.Context, []string) error{
		"engage": b.engage, "fairness": b.fairness, "large-flood": b.largeFlood, "memory": b.memory, "converge": b.converge, "sharding": b.shards, "scale": b.scale,
	}
	for _, name := range only {
		scenario, ok := measure[name]
		if !ok {
			return fmt.Errorf("scenario %q has no measurement", name)
		}
		for rep := range b.reps {
			order := repetitionOrder(b.impls, rep)
			if len(order) == 0 {
				break
			}
			logf("%s, repetition %d of %d: %s", name, rep+1, b.reps, strings.Join(order, ", "))
			// Co-located unless the scenario places its members otherwise.
			if err := b.place(colocated, nil, -1); err != nil {
				return err
			}
			if err := scenario(ctx, order); err != nil {
				b.print(os.Stdout, start)
				return fmt.Errorf("%s: %w (manager logs in %s)", name, err, b.logDir)
			}
		}
	}
	b.print(os.Stdout, start)
	for _, impl := range b.stoppedBadly {
		if impl == widgethub {
			return errors.New("a widgethub manager stopped badly (see the end of the table)")
		}
	}
	if missed := b.missed(); len(missed) > 0 {
		if !b.enforceTargets {
			logf("targets missed at these sizes (not enforced with -quick): %s", strings.Join(missed, "; "))
			return nil
		}
		return fmt.Errorf("targets missed in at least one repetition: %s", strings.Join(missed, "; "))
	}
	return nil
}

// repetitionOrder is the managers measured in repetition rep, in their
// order: every one in the first, rotated as given; after it all but peer,
// rotated among themselves. peer's figures are set by its 5 QPS (its drains
// and cold starts reach its window at about 5 Widgets/s in every run) and no
// target is relative to them, so its one repetition shows its column at a
// fifth of the time its three took (about 30 minutes of `make bench`).
func repetitionOrder(impls []string, rep int) []string {
	if rep > 0 {
		impls = slices.DeleteFunc(slices.Clone(impls), func(impl string) bool { return impl == peer })
		if len(impls) == 0 {
			return nil
		}
	}
	return rotate(impls, rep)
}

// rotate is impls starting at the n-th (modulo their number): each
// repetition measures the managers in another order, so that the effect of
// going first or last on the API servers shows in the spread.
func rotate(impls []string, n int) []string {
	n %= len(impls)
	return append(slices.Clone(impls[n:]), impls[:n]...)
}

// stop stops p. A manager that stops badly (with an error, or not within a
// minute) does not end the run: it is reported below the table, and the run
// fails at the end if it was widgethub.
func (b *benchmark) stop(p *managerProcess, scenario string) {
	if err := p.stop(); err != nil {
		logf("%s: %v (log %s)", scenario, err, filepath.Base(p.logPath))
		b.badStops = append(b.badStops, fmt.Sprintf("%s: %v (log %s)", scenario, err, filepath.Base(p.logPath)))
		b.stoppedBadly = append(b.stoppedBadly, p.impl)
	}
}

func memberName(i int) string { return fmt.Sprintf("m%02d", i+1) }

// ensureMembers starts member API servers until the fleet has n.
func (b *benchmark) ensureMembers(n int) error {
	var names []string
	for i := len(b.members); i < n; i++ {
		names = append(names, memberName(i))
	}
	if len(names) == 0 {
		return nil
	}
	start := time.Now()
	planes, err := b.fleet.AddMembers(names...)
	if err != nil {
		return err
	}
	logf("%d more member API servers up in %s", len(planes), formatDuration(time.Since(start)))
	return b.addClients(planes)
}

func (b *benchmark) addClients(planes []*fleet.ControlPlane) error {
	for _, cp := range planes {
		c, err := newClient(cp.Config, clusters.NewScheme())
		if err != nil {
			return err
		}
		writes, err := newWriteCounter(cp.Config)
		if err != nil {
			return err
		}
		b.members = append(b.members, member{ControlPlane: cp, client: c, writes: writes})
		b.putInCgroup(cp)
	}
	return nil
}

// startManager starts impl's manager process for scenario. Its log is
// numbered among the scenario's logs of impl, so that no repetition's log
// replaces an earlier one's.
func (b *benchmark) startManager(impl, scenario string) (*managerProcess, error) {
	args := append([]string{"-hub-kubeconfig", b.hubKubeconfig}, b.managerArgs...)
	name := scenario + "-" + impl
	if b.managerStarts == nil {
		b.managerStarts = map[string]int{}
	}
	b.managerStarts[name]++
	p, err := startManager(impl, filepath.Join(b.logDir, fmt.Sprintf("%s-%d.log", name, b.managerStarts[name])), args)
	if err != nil {
		return nil, err
	}
	if err := b.putManagerInCgroup(p.cmd.Process.Pid); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// windowFor is how long impl may take in a bounded measurement.
func (b *benchmark) windowFor(impl string) time.Duration {
	switch {
	case impl == peer:
		return b.peerWindow
	case impl == peerTuned && b.placement == own:
		return b.ownPeerWindowFor()
	}
	return b.window
}

func (b *benchmark) register(ctx context.Context, name string, kubeconfigData []byte) error {
	return b.hub.Create(ctx, registration.NewSecret(b.opts.RegistrationNamespace, name, kubeconfigData))
}

// unregisterAll deletes every registration Secret.
func (b *benchmark) unregisterAll(ctx context.Context) error {
	return b.hub.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(b.opts.RegistrationNamespace),
		client.MatchingLabels{registration.SecretLabel: "true"})
}

// waitEngaged waits until p has engaged every one of names.
func waitEngaged(ctx context.Context, p *managerProcess, names []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		n, err := p.engaged(ctx, names)
		if err != nil {
			return err
		}
		if n == len(names) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s engaged %d of %d members within %s", p.impl, n, len(names), within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// loadAverage is the first line of uptime's numbers.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
