package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// The rows of the table, in order.
const (
	rowEngage = iota
	rowQuietBaseline
	rowFairness
	rowDrain
	rowThroughput
	rowServerWrites
	rowCeiling
	rowMemoryPerMember
	rowMemoryTotal
	rowConverge
	rowShardEngage
	rowCount
)

// table holds each row's result per manager and whether widgethub met the row's target.
type table struct {
	impls []string
	cells [rowCount]map[string]string
	met   [rowCount]*bool
}

func (t *table) init(impls []string) {
	t.impls = impls
	for i := range t.cells {
		t.cells[i] = map[string]string{}
	}
}

// set records impl's result of row; met is widgethub's verdict on the row's target.
func (t *table) set(row int, impl, value string, met bool) {
	t.cells[row][impl] = value
	if impl == widgethub {
		t.met[row] = &met
	}
}

func (b *benchmark) rowTitles() [rowCount]string {
	return [rowCount]string{
		rowEngage:          fmt.Sprintf("engage latency: Secret created -> first Widget reconciled (member of %d Widgets; median of %d)", b.engageWidgets, b.engageRounds),
		rowQuietBaseline:   fmt.Sprintf("quiet member change latency p50 / p99 with no flood (%d changes, one every %s)", b.baselineChanges, b.changeEvery),
		rowFairness:        fmt.Sprintf("quiet member change latency p50 / p99 during a %d-Widget flood of another member", b.floodWidgets),
		rowDrain:           fmt.Sprintf("flood: %d new Widgets created by %d writers until all reconciled", b.floodWidgets, b.writers),
		rowThroughput:      "flood throughput, controller writes/s (Deployments + Widget status)",
		rowServerWrites:    "flooded API server, all writes/s (Widget creates, Deployments, status, Events)",
		rowCeiling:         "API server ceiling: merge-patches/s, 1 writer / 8 writers, before; after the floods (no manager running)",
		rowMemoryPerMember: fmt.Sprintf("hub heap per idle member (%d members x %d Widgets; %d API servers)", b.idleMembers, b.idleWidgets, b.idleServers),
		rowMemoryTotal:     fmt.Sprintf("hub memory with %d idle members", b.idleMembers),
		rowConverge:        fmt.Sprintf("cold start: %d members x %d Widgets, manager start -> all reconciled", b.convergeMembers, b.convergeWidgets),
		rowShardEngage: fmt.Sprintf("sharding: %d registrations (%d API servers, %d Widgets each) on 1 replica, then on %d replicas: Secrets created -> all engaged; heap and RSS per replica once idle",
			b.shardMembers, b.shardServers, b.shardWidgets, b.shardReplicas),
	}
}

var targets = [rowCount]string{
	rowEngage:          "< 500 ms",
	rowFairness:        "p99 < 100 ms",
	rowThroughput:      ">= 50% of 8-writer ceiling",
	rowMemoryPerMember: "100 members < 512 MiB",
	rowShardEngage:     "members' heap per replica <= 1.5/N of one replica's",
}

// print writes the table as Markdown, with the run's conditions above it.
func (b *benchmark) print(w io.Writer, start time.Time) {
	fmt.Fprintf(w, "\nwidgethub bench, %s, %d CPUs, load average %s at the end, took %s\n",
		time.Now().Format(time.RFC3339), runtime.NumCPU(), loadAverage(), time.Since(start).Round(time.Second))
	fmt.Fprintf(w, "widgethub: --member-qps=%g --member-burst=%d --max-concurrent-reconciles=%d (%d per member); peer: client-go defaults (5 QPS, burst 10), 1 worker, controller-runtime's default queue\n\n",
		b.opts.MemberQPS, b.opts.MemberBurst, b.opts.MaxConcurrentReconciles, b.opts.ReconcilesPerMember())
	writeMarkdown(w, b.rows())
	fmt.Fprintf(w, "\nManager logs: %s\n", b.logDir)
}

// rows are the table's cells, a header first, without the rows no manager
// has a result in.
func (b *benchmark) rows() [][]string {
	var ceilings []string
	for _, c := range b.ceiling {
		ceilings = append(ceilings, fmt.Sprintf("%.0f / %.0f", c[0], c[1]))
	}
	if len(ceilings) > 0 {
		b.table.cells[rowCeiling][""] = strings.Join(ceilings, "; ")
	}
	titles := b.rowTitles()
	header := []string{"measurement"}
	for _, impl := range b.impls {
		name := impl
		if impl == peer {
			name = "peer (multicluster-runtime kubeconfig provider)"
		}
		header = append(header, name)
	}
	header = append(header, "target", "met")
	rows := [][]string{header}
	for r := range rowCount {
		row := []string{titles[r]}
		empty := true
		for _, impl := range b.impls {
			v := b.table.cells[r][impl]
			if r == rowCeiling {
				v = b.table.cells[r][""]
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
		met := ""
		if m := b.table.met[r]; m != nil && targets[r] != "" {
			met = map[bool]string{true: "yes", false: "NO"}[*m]
		}
		rows = append(rows, append(row, targets[r], met))
	}
	return rows
}

// writeMarkdown writes rows as a Markdown table, the first row its header.
func writeMarkdown(w io.Writer, rows [][]string) {
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
