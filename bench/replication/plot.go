package replication

import (
	"fmt"
	"slices"

	"github.com/yuebing/yuebing/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws replica counts over time, one panel per trace, in
// the manner of the paper's Figure 11: for each rank N, the mean replica count
// of the top N keys, solid with the replication core, dashed without it. It
// writes a PNG to path.
func Plot(runs []Run, o Options, path string) error {
	o.EnsureDefaults()
	var traces []string
	for _, r := range runs {
		if !slices.Contains(traces, r.Trace) {
			traces = append(traces, r.Trace)
		}
	}
	if len(traces) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	plots := make([][]*plot.Plot, 1)
	for _, tr := range traces {
		p := plot.New()
		p.Title.Text = tr + " trace"
		p.X.Label.Text = "time (minutes)"
		p.Y.Label.Text = "mean replicas of the top keys"
		p.Y.Min, p.Y.Max = 0, float64(o.Nodes)+0.5
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		p.Add(plotter.NewGrid())
		for _, r := range runs {
			if r.Trace != tr {
				continue
			}
			for i, rank := range o.Ranks {
				xy := make(plotter.XYs, len(r.Samples))
				for j, s := range r.Samples {
					xy[j] = plotter.XY{X: s.At.Minutes(), Y: s.MeanTop[i]}
				}
				l, err := plotter.NewLine(xy)
				if err != nil {
					return fmt.Errorf("bench: plot: %w", err)
				}
				l.Color = bench.PolicyColor(i)
				l.Width = vg.Points(1.4)
				if r.Setup == SetupNoReplication {
					l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
					l.Width = vg.Points(0.9)
				}
				p.Add(l)
				p.Legend.Add(fmt.Sprintf("top %d, %s", rank, r.Setup), l)
			}
		}
		plots[0] = append(plots[0], p)
	}
	const panelW, panelH = 4.6 * vg.Inch, 3.4 * vg.Inch
	tiles := draw.Tiles{Rows: 1, Cols: len(traces), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	return bench.WritePNG(path, plots, tiles, panelW, panelH, 110)
}
