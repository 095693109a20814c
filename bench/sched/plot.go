package sched

import (
	"fmt"
	"image/color"

	"github.com/yuebing/yuebing/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/yuebing/yuebing/scheduler"
)

// Plot draws the prefill and decode load over time, one panel per
// run, like the load figure of the Mooncake overload notes: the runs that
// reject (early, predicted) when there are any, else every run. A load of
// 1 is the SLO. It writes a PNG to path.
func Plot(cells []Cell, path string) error {
	var pick []Cell
	for _, c := range cells {
		if c.Result != nil && c.Options.Rejection != scheduler.RejectNone {
			pick = append(pick, c)
		}
	}
	if len(pick) == 0 {
		for _, c := range cells {
			if c.Result != nil {
				pick = append(pick, c)
			}
		}
	}
	if len(pick) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	row := make([]*plot.Plot, len(pick))
	for i, c := range pick {
		p, err := loadPanel(c)
		if err != nil {
			return err
		}
		row[i] = p
	}
	const panelW, panelH = 4.6 * vg.Inch, 2.8 * vg.Inch
	plots := make([][]*plot.Plot, len(pick))
	for i, p := range row {
		plots[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(pick), Cols: 1, PadY: vg.Millimeter * 3, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 3}
	return bench.WritePNG(path, plots, tiles, panelW, panelH, 90)
}

func loadPanel(c Cell) (*plot.Plot, error) {
	p := plot.New()
	o := c.Options
	p.Title.Text = fmt.Sprintf("%s, %s rejection: %d prefill + %d decode, %gx", o.Policy, o.Rejection, o.Prefill, o.Decode, o.Speed)
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.Text = "time (min)"
	p.Y.Label.Text = "load (1 = SLO)"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	p.Add(plotter.NewGrid())
	var pre, dec plotter.XYs
	ymax := 1.2
	for _, s := range c.Result.Loads {
		x := s.At.Minutes()
		pre = append(pre, plotter.XY{X: x, Y: s.Prefill})
		dec = append(dec, plotter.XY{X: x, Y: s.Decode})
		ymax = max(ymax, s.Prefill, s.Decode)
	}
	p.Y.Max = min(ymax*1.05, 3)
	for _, l := range []struct {
		name string
		xy   plotter.XYs
		c    color.Color
	}{{"prefill", pre, color.RGBA{0, 158, 115, 255}}, {"decode", dec, color.RGBA{230, 159, 0, 255}}} {
		if len(l.xy) == 0 {
			continue
		}
		line, err := plotter.NewLine(l.xy)
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		line.Color = l.c
		line.Width = vg.Points(1)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	return p, nil
}
