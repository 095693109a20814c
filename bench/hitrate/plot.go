package hitrate

import (
	"fmt"
	"image/color"
	"slices"
	"strconv"

	"github.com/yuebing/yuebing/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// localCacheTokens marks one node's DRAM cache in the plot, as the dashed
// line in the paper's Figure 9 does.
const localCacheTokens = 3_000_000

// Plot draws hit rate against cache capacity (log scale), one panel
// per trace, like the paper's Figure 9: a line per policy and for Belady's
// MIN, the unbounded hit rate as a horizontal line and 3M tokens as a
// vertical one. It writes a PNG to path.
//
// The drawing uses gonum.org/v1/plot: pure Go (no cgo, no external
// renderer), so the plot builds and renders the same on every machine.
func Plot(cells []Cell, path string) error {
	var traces []string
	for _, c := range cells {
		if !slices.Contains(traces, c.Trace) {
			traces = append(traces, c.Trace)
		}
	}
	if len(traces) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	plots := make([][]*plot.Plot, 1)
	for _, tr := range traces {
		p, err := hitratePanel(cells, tr)
		if err != nil {
			return err
		}
		plots[0] = append(plots[0], p)
	}
	const panelW, panelH = 4.2 * vg.Inch, 3.4 * vg.Inch
	tiles := draw.Tiles{Rows: 1, Cols: len(traces), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	return bench.WritePNG(path, plots, tiles, panelW, panelH, 110)
}

func hitratePanel(cells []Cell, trace string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = trace + " trace"
	p.X.Label.Text = "cache capacity (tokens)"
	p.Y.Label.Text = "prefix hit rate"
	p.X.Scale = plot.LogScale{}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	p.Add(plotter.NewGrid())

	var names []string
	lines := map[string]plotter.XYs{}
	unbounded := -1.0
	minX, maxX := 0.0, 0.0
	for _, c := range cells {
		if c.Trace != trace {
			continue
		}
		if c.Policy == PolicySSD {
			continue // two tiers: rows only
		}
		if c.Policy == PolicyUnbounded {
			unbounded = c.HitRate()
			continue
		}
		x := float64(c.CapacityTokens)
		if minX == 0 || x < minX {
			minX = x
		}
		maxX = max(maxX, x)
		if _, ok := lines[c.Policy]; !ok {
			names = append(names, c.Policy)
		}
		lines[c.Policy] = append(lines[c.Policy], plotter.XY{X: x, Y: c.HitRate()})
	}
	if len(names) == 0 {
		return p, nil // only the unbounded rate: nothing to draw against capacity
	}
	p.Y.Max = max(unbounded, 0) * 1.12
	var ticks plot.ConstantTicks
	for _, xy := range lines[names[0]] {
		ticks = append(ticks, plot.Tick{Value: xy.X, Label: tokenLabel(int64(xy.X))})
	}
	p.X.Tick.Marker = ticks
	for i, name := range names {
		xy := lines[name]
		slices.SortFunc(xy, func(a, b plotter.XY) int { return int(a.X - b.X) })
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		c := bench.PolicyColor(i - 1) // names[0] is Belady, drawn in black
		l.Color, s.Color = c, c
		l.Width = vg.Points(1.2)
		s.Radius = vg.Points(2)
		if name == PolicyBelady {
			l.Color, s.Color = color.Black, color.Black
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		if name == "prefix" {
			l.Color, s.Color = color.RGBA{200, 0, 0, 255}, color.RGBA{200, 0, 0, 255}
			l.Width = vg.Points(2.2)
		}
		p.Add(l, s)
		p.Legend.Add(name, l, s)
	}
	if unbounded >= 0 {
		u, err := plotter.NewLine(plotter.XYs{{X: minX, Y: unbounded}, {X: maxX, Y: unbounded}})
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		u.Color = color.Gray{Y: 110}
		u.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(u)
		p.Legend.Add("unbounded", u)
	}
	if minX <= localCacheTokens && localCacheTokens <= maxX {
		v, err := plotter.NewLine(plotter.XYs{{X: localCacheTokens, Y: 0}, {X: localCacheTokens, Y: p.Y.Max}})
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		v.Color = color.Gray{Y: 160}
		v.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(v)
	}
	return p, nil
}

// tokenLabel writes a token count as the paper does: 3M, 500K.
func tokenLabel(n int64) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "M"
	case n >= 1000 && n%100 == 0:
		return strconv.FormatFloat(float64(n)/1e3, 'f', -1, 64) + "K"
	}
	return strconv.FormatInt(n, 10)
}
