package main

import (
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
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

// writeChart draws the quiet member's change latency over the time of the
// flood, one series per manager (every repetition), on a log scale, with the
// p99 target, and saves it as SVG or PNG (from path's extension).
func writeChart(path string, traces []floodTrace, floodWidgets int) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Quiet member's change latency while another member is flooded with %d Widgets", floodWidgets)
	p.X.Label.Text = "seconds since the flood began"
	p.Y.Label.Text = "patch -> reconciled (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())

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
