package soak

import (
	"fmt"
	"image/color"

	"github.com/yuebing/yuebing/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws a soak over time, two panels: the p99 latency of reads
// and writes per window (log scale), and the largest node RSS per window
// against the bound; dashed verticals mark the kills. It writes a PNG to
// path.
func Plot(res *Result, path string) error {
	if len(res.Windows) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	title := "single node"
	if res.Cluster {
		title = fmt.Sprintf("%d-node cluster", len(res.Nodes))
	}
	lat := plot.New()
	lat.Title.Text = fmt.Sprintf("soak, %s: p99 latency per window", title)
	lat.X.Label.Text = "time (minutes)"
	lat.Y.Label.Text = "p99 latency (ms)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lat.Legend.Top = true
	lat.Legend.TextStyle.Font.Size = vg.Points(7)
	lat.Add(plotter.NewGrid())
	var get, put plotter.XYs
	yMin, yMax := 1e9, 0.0
	for _, w := range res.Windows {
		x := (w.Start.Minutes())
		for _, c := range []struct {
			xy *plotter.XYs
			v  float64
		}{{&get, w.P99Get.Seconds() * 1e3}, {&put, w.P99Put.Seconds() * 1e3}} {
			if c.v > 0 {
				*c.xy = append(*c.xy, plotter.XY{X: x, Y: c.v})
				yMin, yMax = min(yMin, c.v), max(yMax, c.v)
			}
		}
	}
	for i, l := range []struct {
		name string
		xy   plotter.XYs
	}{{"get", get}, {"put", put}} {
		if len(l.xy) == 0 {
			continue
		}
		ln, err := plotter.NewLine(l.xy)
		if err != nil {
			return fmt.Errorf("bench: plot: %w", err)
		}
		ln.Color = bench.PolicyColor(i)
		ln.Width = vg.Points(1.3)
		lat.Add(ln)
		lat.Legend.Add("p99 "+l.name, ln)
	}
	if yMax == 0 {
		yMin, yMax = 0.1, 1
	}
	lat.Y.Min, lat.Y.Max = yMin/1.5, yMax*4 // room for the legend

	mem := plot.New()
	mem.Title.Text = "largest node RSS per window"
	mem.X.Label.Text = "time (minutes)"
	mem.Y.Label.Text = "MiB"
	mem.Legend.Top = true
	mem.Legend.Left = true
	mem.Legend.TextStyle.Font.Size = vg.Points(7)
	mem.Add(plotter.NewGrid())
	var rss plotter.XYs
	for _, w := range res.Windows {
		if w.MaxRSS > 0 {
			rss = append(rss, plotter.XY{X: w.Start.Minutes(), Y: float64(w.MaxRSS) / (1 << 20)})
		}
	}
	end := res.Duration.Minutes()
	if len(rss) > 0 {
		ln, err := plotter.NewLine(rss)
		if err != nil {
			return fmt.Errorf("bench: plot: %w", err)
		}
		ln.Color = bench.PolicyColor(2)
		ln.Width = vg.Points(1.3)
		mem.Add(ln)
		mem.Legend.Add("max RSS", ln)
	}
	bound, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(res.RSSBound) / (1 << 20)}, {X: end, Y: float64(res.RSSBound) / (1 << 20)}})
	if err != nil {
		return fmt.Errorf("bench: plot: %w", err)
	}
	bound.Color = color.RGBA{200, 0, 0, 255}
	bound.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	mem.Add(bound)
	mem.Legend.Add("bound", bound)
	mem.Y.Min, mem.Y.Max = 0, float64(res.RSSBound)/(1<<20)*1.25

	for _, p := range []*plot.Plot{lat, mem} {
		p.X.Min, p.X.Max = 0, end
		for i, k := range res.KillTimes {
			v, err := plotter.NewLine(plotter.XYs{{X: k.Minutes(), Y: p.Y.Min}, {X: k.Minutes(), Y: p.Y.Max}})
			if err != nil {
				return fmt.Errorf("bench: plot: %w", err)
			}
			v.Color = color.Gray{Y: 140}
			v.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(v)
			if i == 0 {
				p.Legend.Add("kill -9", v)
			}
		}
	}
	const panelW, panelH = 6.4 * vg.Inch, 2.8 * vg.Inch
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	return bench.WritePNG(path, [][]*plot.Plot{{lat}, {mem}}, tiles, panelW, panelH, 110)
}
