package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/widgethub/widgethub/providers/sharding"
)

// The rows of the table, in order.
const (
	rowEngage = iota
	rowQuietBaselineOwn
	rowQuietBaseline
	rowFairnessOwn
	rowFairness
	rowQuietSplitOwn
	rowQuietSplit
	rowDrainOwn
	rowDrain
	rowFairnessLargeOwn
	rowFairnessLarge
	rowDrainLargeOwn
	rowDrainLarge
	rowThroughputOwn
	rowThroughput
	rowServerWritesOwn
	rowServerWrites
	rowCeilingOwn
	rowCeiling
	rowMemoryPerMember
	rowMemoryTotal
	rowConvergeOwn
	rowConverge
	rowConvergeOneOwn
	rowConvergeOne
	rowSpread
	rowShardEngage
	rowScale
	rowScaleRest
	rowScaleTakeover
	rowCount
)

// table holds, per row and manager, the result of every repetition, and
// the rows measured without a manager.
type table struct {
	impls   []string
	results [rowCount]map[string][]result
	shared  [rowCount]string
}

// result is one repetition's measurement of a row by one manager: the text
// printed, the key its median and spread are taken over, and, for
// widgethub, whether the row's target was met.
type result struct {
	text string
	key  key
	met  bool
}

// key is the number a row is ordered by across repetitions, with its text.
type key struct {
	value float64
	text  string
}

func durationKey(d time.Duration) key { return key{d.Seconds(), formatDuration(d)} }

func quantileKey(q quantile) key { return key{q.value.Seconds(), q.String()} }

func rateKey(perSecond float64) key { return key{perSecond, fmt.Sprintf("%.0f/s", perSecond)} }

func bytesKey(bytes float64) key { return key{bytes, mib(bytes)} }

func (t *table) init(impls []string) {
	t.impls = impls
	for i := range t.results {
		t.results[i] = map[string][]result{}
	}
}

// add records one repetition of impl's result of row; met is widgethub's
// verdict on the row's target in this repetition.
func (t *table) add(row int, impl, text string, k key, met bool) {
	t.results[row][impl] = append(t.results[row][impl], result{text: text, key: k, met: met})
}

// cell is the text of the median repetition (the lower of two middles) and,
// over several, the spread of the key; met holds only if it held in every
// repetition.
func (t *table) cell(row int, impl string) (text string, met bool) {
	rs := slices.Clone(t.results[row][impl])
	if len(rs) == 0 {
		return "", false
	}
	slices.SortStableFunc(rs, func(a, b result) int { return cmp.Compare(a.key.value, b.key.value) })
	text = rs[(len(rs)-1)/2].text
	if len(rs) > 1 {
		text += fmt.Sprintf(" [median of %d; %s-%s]", len(rs), rs[0].key.text, rs[len(rs)-1].key.text)
	}
	met = true
	for _, r := range rs {
		met = met && r.met
	}
	return text, met
}

// met is whether widgethub met row's target in every repetition; judged
// is false where the row has no target or no widgethub result.
func (t *table) met(row int) (met, judged bool) {
	if targets[row] == "" || len(t.results[row][widgethub]) == 0 {
		return false, false
	}
	_, met = t.cell(row, widgethub)
	return met, true
}

// missed are the titles of the rows whose target widgethub missed in a
// repetition.
func (b *benchmark) missed() []string {
	titles := b.rowTitles()
	var missed []string
	for r := range rowCount {
		if met, judged := b.table.met(r); judged && !met {
			missed = append(missed, titles[r])
		}
	}
	return missed
}

func (b *benchmark) rowTitles() [rowCount]string {
	return placedTitles([rowCount]string{
		rowEngage:        fmt.Sprintf("engage latency: Secret created -> first Widget reconciled (member of %d Widgets; median of %d)", b.engageWidgets, b.engageRounds),
		rowQuietBaseline: fmt.Sprintf("quiet member change latency p50 / p99 with no flood (%d changes, one every %s)", b.baselineChanges, b.changeEvery),
		rowFairness:      fairnessTitle(b.floodWidgets),
		rowQuietSplit: fmt.Sprintf("the same changes, p50 / p99 of each step as the bench's watches see it: its patch call; answered -> the Widget's Deployment written; -> the Widget's status written (%d-Widget flood)",
			b.floodWidgets),
		rowDrain:           b.drainTitle(b.floodWidgets),
		rowFairnessLarge:   fairnessTitle(b.largeFloodWidgets),
		rowDrainLarge:      b.drainTitle(b.largeFloodWidgets),
		rowThroughput:      "flood throughput, controller writes/s (Deployments + Widget status)",
		rowServerWrites:    "flooded API server, all writes/s (Widget creates, Deployments, status, Events)",
		rowCeiling:         "API server ceiling: merge-patches/s, 1 writer / 8 writers, before; after the floods (no manager running)",
		rowMemoryPerMember: fmt.Sprintf("hub heap per idle member (%d members x %d Widgets; %d API servers)", b.idleMembers, b.idleWidgets, b.idleServers),
		rowMemoryTotal:     fmt.Sprintf("hub memory with %d idle members", b.idleMembers),
		rowConverge:        fmt.Sprintf("cold start: %d members x %d Widgets, manager start -> all reconciled", b.convergeMembers, b.convergeWidgets),
		rowConvergeOne:     fmt.Sprintf("cold start: 1 member x %d Widgets (no spread over co-located API servers), manager start -> all reconciled", b.convergeOneWidgets),
		rowSpread: fmt.Sprintf("what writing to %d co-located members at once costs them, no manager running, each repetition: %d writers' status patches/s on 1 member, then spread 1 on each; per patch beyond idle, CPU and threads' runs on a CPU of the API servers + etcds, and the etcds' WAL writes",
			b.convergeMembers, b.convergeMembers),
		rowShardEngage: fmt.Sprintf("sharding: %d registrations (%d API servers, %d Widgets each) on 1 replica, then on %d replicas: Secrets created -> all engaged; heap and RSS per replica once idle",
			b.shardMembers, b.shardServers, b.shardWidgets, b.shardReplicas),
		rowScale: fmt.Sprintf("scale: %v registrations, each its own user (%d API servers, %d Widgets each), on %d sharded replicas: Secrets created -> all engaged; heap and RSS per replica at rest",
			b.scaleMembers, b.scaleServers, b.scaleWidgets, b.scaleReplicas),
		rowScaleRest: fmt.Sprintf("scale at rest: the replicas' hub writes/s by kind (from %s to %s after all engaged); the oldest MemberCluster lastProbeTime",
			formatDuration(b.settle), formatDuration(b.restFor)),
		rowScaleTakeover: "scale: SIGKILL of one replica -> its members served again by the others; a Widget change of its pinned member, made right after the kill, reconciled",
	})
}

// fairnessTitle and drainTitle title the rows of a flood of widgets.
func fairnessTitle(widgets int) string {
	return fmt.Sprintf("quiet member change latency p50 / p99 during a %d-Widget flood of another member", widgets)
}

func (b *benchmark) drainTitle(widgets int) string {
	return fmt.Sprintf("flood: %d new Widgets created by %d writers until all reconciled", widgets, b.writers)
}

// The targets of every flood's rows.
const (
	fairnessTarget = "p99 < 100 ms and <= 2x the patch call's p99"
	drainTarget    = "<= peer-tuned's"
)

var targets = [rowCount]string{
	rowEngage:          "< 500 ms",
	rowFairness:        fairnessTarget,
	rowDrain:           drainTarget,
	rowFairnessLarge:   fairnessTarget,
	rowDrainLarge:      drainTarget,
	rowThroughput:      ">= 50% of 8-writer ceiling",
	rowMemoryPerMember: "<= 0.75x peer-tuned's; 100 members < 512 MiB",
	rowConverge:        "<= peer-tuned's",
	rowConvergeOne:     "<= peer-tuned's",
	rowShardEngage:     "members' heap per replica <= 1.5/N of one replica's",
	rowScaleRest:       "oldest lastProbeTime <= probe refresh + probe interval",
	rowScaleTakeover:   "all served again and the change reconciled",
}

// print writes the table as Markdown, with the run's conditions above it
// and the managers that stopped badly below it.
func (b *benchmark) print(w io.Writer, start time.Time) {
	peerOnce := ""
	if b.reps > 1 && slices.Contains(b.impls, peer) {
		peerOnce = ", peer measured in the first only"
	}
	fmt.Fprintf(w, "\nwidgethub bench, %s, %d CPUs, load average %s at the end, took %s; %d repetition(s), the managers' order rotated in each%s\n",
		time.Now().Format(time.RFC3339), runtime.NumCPU(), loadAverage(), time.Since(start).Round(time.Second), b.reps, peerOnce)
	fmt.Fprintf(w, "widgethub and peer-tuned: member QPS %g, burst %d, %d workers (widgethub: %d per member); peer: client-go defaults (5 QPS, burst 10), 1 worker; both peers use multicluster-runtime's default queue\n\n",
		b.opts.MemberQPS, b.opts.MemberBurst, b.opts.MaxConcurrentReconciles, b.opts.ReconcilesPerMember())
	writeMarkdown(w, b.rows())
	b.printPlacement(w)
	if summary := b.quiescedSummary(); summary != "" {
		fmt.Fprintf(w, "\n%s\n", summary)
	}
	for _, problem := range b.badStops {
		fmt.Fprintf(w, "\nStopped badly: %s", problem)
	}
	fmt.Fprintf(w, "\nManager logs: %s\n", b.logDir)
	if len(b.traces) > 0 {
		path := b.chartPath
		if path == "" {
			path = filepath.Join(b.logDir, "fairness.svg")
		}
		if err := writeChart(path, b.traces, b.floodWidgets); err != nil {
			fmt.Fprintf(w, "Chart: %v\n", err)
		} else {
			fmt.Fprintf(w, "Chart of the quiet member's change latency during the floods: %s\n", path)
		}
	}
	if len(b.scaleRuns) > 0 {
		dir := cmp.Or(b.chartDir, b.logDir)
		heap, takeover := filepath.Join(dir, "scale-heap.svg"), filepath.Join(dir, "scale-takeover.svg")
		err := errors.Join(writeHeapChart(heap, b.scaleRuns), writeTakeoverChart(takeover, b.scaleRuns, sharding.DefaultLeaseDuration))
		if err != nil {
			fmt.Fprintf(w, "Scale charts: %v\n", err)
		} else {
			fmt.Fprintf(w, "Charts of the heap per replica and of the take-over: %s, %s\n", heap, takeover)
		}
	}
}

// rows are the table's cells, a header first, without the rows no manager
// has a result in.
func (b *benchmark) rows() [][]string {
	for row, measured := range map[int][][2]float64{rowCeiling: b.ceiling, rowCeilingOwn: b.ownCeiling} {
		var ceilings []string
		for _, c := range measured {
			ceilings = append(ceilings, fmt.Sprintf("%.0f / %.0f", c[0], c[1]))
		}
		if len(ceilings) > 0 {
			b.table.shared[row] = strings.Join(ceilings, "; ")
		}
	}
	var spreads []string
	for i, s := range b.spreads {
		spreads = append(spreads, fmt.Sprintf("(%d) on 1: %s; spread: %s", i+1, s[0], s[1]))
	}
	b.table.shared[rowSpread] = strings.Join(spreads, " ")
	titles := b.rowTitles()
	header := []string{"measurement"}
	for _, impl := range b.impls {
		header = append(header, implTitles[impl])
	}
	header = append(header, "target", "met")
	rows := [][]string{header}
	for r := range rowCount {
		row := []string{titles[r]}
		empty := true
		met := ""
		if ok, judged := b.table.met(r); judged {
			met = map[bool]string{true: "yes", false: "NO"}[ok]
		}
		for _, impl := range b.impls {
			v, _ := b.table.cell(r, impl)
			if r == rowCeiling || r == rowCeilingOwn || r == rowSpread {
				v = b.table.shared[r]
			}
			if v == "" {
				v = "-"
			} else {
				empty = false
			}
			row = append(row, v)
		}
		if empty {
			continue
		}
		rows = append(rows, append(row, targets[r], met))
	}
	return rows
}

// writeMarkdown writes rows as a Markdown table, the first row its header.
func writeMarkdown(w io.Writer, rows [][]string) {
	// A "|" in a cell would end the cell: escape it, as Markdown allows.
	rows = slices.Clone(rows)
	for i, row := range rows {
		rows[i] = slices.Clone(row)
		for j, c := range row {
			rows[i][j] = strings.ReplaceAll(c, "|", `\|`)
		}
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for i, row := range rows {
		cells := make([]string, len(row))
		for j, c := range row {
			cells[j] = c + strings.Repeat(" ", widths[j]-len(c))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		if i == 0 {
			dashes := make([]string, len(widths))
			for j, n := range widths {
				dashes[j] = strings.Repeat("-", n)
			}
			fmt.Fprintf(w, "|-%s-|\n", strings.Join(dashes, "-|-"))
		}
	}
}
