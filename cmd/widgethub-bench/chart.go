package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// floodTrace is the quiet member's changes during one flood of one manager:
// when each was made, from the flood's start, and how long it took.
type floodTrace struct {
	impl string
	// drain is how long the flood took (the window, when it did not drain).
	drain  time.Duration
	points []tracePoint
}

// tracePoint is one change: unfinished ones were still waiting when the
// window closed, so their latency is a lower bound.
type tracePoint struct {
	at, latency time.Duration
	unfinished  bool
}

// traceOf is res's changes, their latencies measured at windowEnd.
func traceOf(impl string, res *floodResult, windowEnd time.Time) floodTrace {
	t := floodTrace{impl: impl, drain: res.drainTime()}
	for _, c := range res.changes {
		s := c.latency(windowEnd)
		t.points = append(t.points, tracePoint{at: c.at.Sub(res.start), latency: s.value, unfinished: s.unfinished})
	}
	return t
}

// implStyles give each manager a colour and a mark that read apart in grey too.
var implStyles = map[string]struct {
	color color.Color
	shape draw.GlyphDrawer
}{
	widgethub: {color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, draw.CircleGlyph{}},
	peerTuned: {color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, draw.SquareGlyph{}},
	peer:      {color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, draw.CrossGlyph{}},
}

// latencyTarget is the quiet member's p99 target during a flood.
const latencyTarget = 100 * time.Millisecond

// newChart is a plot with a title, axis labels, a grid and its legend at the top.
func newChart(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// writeChart draws the quiet member's change latency over the time of the
// flood, one series per manager (every repetition), on a log scale, with the
// p99 target, and saves it as SVG or PNG (from path's extension).
func writeChart(path string, traces []floodTrace, floodWidgets int) error {
	p := newChart(fmt.Sprintf("Quiet member's change latency while another member is flooded with %d Widgets", floodWidgets),
		"seconds since the flood began", "patch -> reconciled (ms, log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}

	byImpl := map[string][]floodTrace{}
	var order []string
	for _, t := range traces {
		if _, seen := byImpl[t.impl]; !seen {
			order = append(order, t.impl)
		}
		byImpl[t.impl] = append(byImpl[t.impl], t)
	}
	maxX := 1.0
	for _, impl := range order {
		var done, waiting plotter.XYs
		var drains []time.Duration
		for _, t := range byImpl[impl] {
			drains = append(drains, t.drain)
			for _, pt := range t.points {
				xy := plotter.XY{X: pt.at.Seconds(), Y: math.Max(pt.latency.Seconds()*1000, 0.1)}
				maxX = math.Max(maxX, xy.X)
				if pt.unfinished {
					waiting = append(waiting, xy)
				} else {
					done = append(done, xy)
				}
			}
		}
		style := implStyles[impl]
		label := fmt.Sprintf("%s (%d floods, drained in %s)", impl, len(drains), durationsText(drains))
		if err := addScatter(p, done, style.color, style.shape, label); err != nil {
			return err
		}
		if err := addScatter(p, waiting, style.color, draw.TriangleGlyph{}, impl+": still waiting when measuring ended (at least)"); err != nil {
			return err
		}
	}
	target, err := plotter.NewLine(plotter.XYs{{X: 0, Y: ms(latencyTarget)}, {X: maxX, Y: ms(latencyTarget)}})
	if err != nil {
		return err
	}
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(target)
	p.Legend.Add("p99 target, 100 ms", target)
	// Headroom on the log scale for the legend above the slowest changes.
	p.Y.Max *= 8
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}

// addScatter adds xys to p with the label, unless there are none.
func addScatter(p *plot.Plot, xys plotter.XYs, c color.Color, shape draw.GlyphDrawer, label string) error {
	if len(xys) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.GlyphStyle.Color, s.GlyphStyle.Shape, s.GlyphStyle.Radius = c, shape, vg.Points(1.8)
	p.Add(s)
	p.Legend.Add(label, s)
	return nil
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

// durationsText lists ds, for a legend.
func durationsText(ds []time.Duration) string {
	text := ""
	for i, d := range ds {
		if i > 0 {
			text += ", "
		}
		text += formatDuration(d)
	}
	return text
}

// writeHeapChart draws each replica's heap in use at rest (after GC)
// against the members it serves, with and without members, for every scale
// run, and the line fitted through them all.
func writeHeapChart(path string, runs []scaleRun) error {
	p := newChart("Heap in use per sharded replica at rest, against the members it serves",
		"members served by the replica", "heap in use after GC (MiB)")
	p.Legend.Left = true
	var all []point
	var xys plotter.XYs
	maxX := 1.0
	for _, r := range runs {
		for i, n := range r.owned {
			for _, pt := range []point{{0, float64(r.heap0[i])}, {float64(n), float64(r.heap[i])}} {
				all = append(all, pt)
				xys = append(xys, plotter.XY{X: pt.x, Y: pt.y / (1 << 20)})
				maxX = math.Max(maxX, pt.x)
			}
		}
	}
	style := implStyles[widgethub]
	if err := addScatter(p, xys, style.color, style.shape, fmt.Sprintf("a replica, without members and at rest (%s)", runsText(runs))); err != nil {
		return err
	}
	base, per := fitLine(all)
	fit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: base / (1 << 20)}, {X: maxX, Y: (base + per*maxX) / (1 << 20)}})
	if err != nil {
		return err
	}
	fit.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(fit)
	p.Legend.Add(fmt.Sprintf("fitted: %s + %.0f KiB per member", mib(base), per/1024), fit)
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// writeTakeoverChart draws, for every scale run, how many of the killed
// replica's members the others served again over the time since the kill,
// with the moment the pinned member's Widget change was reconciled and the
// lease duration after which the others may take over.
func writeTakeoverChart(path string, runs []scaleRun, leaseDuration time.Duration) error {
	p := newChart("Take-over of a SIGKILLed replica's members", "seconds since SIGKILL", "its members served again by the others")
	p.Legend.Left = true
	maxY := 1.0
	var reconciled plotter.XYs
	for i, r := range runs {
		var xys plotter.XYs
		for _, s := range r.takeover.timeline {
			xys = append(xys, plotter.XY{X: s.at.Seconds(), Y: float64(s.served)})
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%d members on %d replicas: %d of %s, all served after %s", r.members, r.replicas,
			r.takeover.members, r.takeover.replica, formatDuration(r.takeover.allServed)), line)
		maxY = math.Max(maxY, float64(r.takeover.members))
		if r.takeover.reconciled > 0 {
			reconciled = append(reconciled, plotter.XY{X: r.takeover.reconciled.Seconds(), Y: float64(r.takeover.members)})
		}
	}
	style := implStyles[widgethub]
	if err := addScatter(p, reconciled, style.color, draw.TriangleGlyph{}, "the pinned member's Widget change reconciled"); err != nil {
		return err
	}
	lease, err := plotter.NewLine(plotter.XYs{{X: leaseDuration.Seconds(), Y: 0}, {X: leaseDuration.Seconds(), Y: maxY}})
	if err != nil {
		return err
	}
	lease.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(lease)
	p.Legend.Add(fmt.Sprintf("lease duration, %s", formatDuration(leaseDuration)), lease)
	p.Y.Max = maxY * 1.35 // room for the legend
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// runsText names the sizes of runs, for a legend.
func runsText(runs []scaleRun) string {
	var sizes []string
	for _, r := range runs {
		size := fmt.Sprintf("%d members on %d replicas", r.members, r.replicas)
		if !slices.Contains(sizes, size) {
			sizes = append(sizes, size)
		}
	}
	return strings.Join(sizes, "; ")
}
