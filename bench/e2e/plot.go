package e2e

import (
	"fmt"
	"image/color"

	"github.com/yuebing/yuebing/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws the TTFT distribution of each mode (a CDF, one line per
// mode) and, beside it, where the prompt tokens came from. It writes a PNG
// to path.
func Plot(r *Result, path string) error {
	if len(r.Modes) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	cdf := plot.New()
	cdf.Title.Text = fmt.Sprintf("TTFT, %d engines, %d requests", r.Options.Engines, len(r.Modes[0].TTFT))
	cdf.X.Label.Text = "TTFT (s)"
	cdf.Y.Label.Text = "fraction of requests"
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.Legend.Top, cdf.Legend.Left = false, false
	colors := []color.Color{color.RGBA{200, 60, 60, 255}, color.RGBA{60, 100, 200, 255}, color.RGBA{40, 150, 70, 255}}
	for i, m := range r.Modes {
		pts := make(plotter.XYs, len(m.TTFT))
		for j, t := range m.TTFT {
			pts[j] = plotter.XY{X: t.Seconds(), Y: float64(j+1) / float64(len(m.TTFT))}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = colors[i%len(colors)]
		line.Width = vg.Points(1.5)
		cdf.Add(line)
		cdf.Legend.Add(m.Mode, line)
	}
	src := plot.New()
	src.Title.Text = "prompt tokens by source"
	src.Y.Label.Text = "share of prompt tokens"
	// Headroom above the bars for the legend.
	src.Y.Min, src.Y.Max = 0, 1.35
	names := make([]string, len(r.Modes))
	var computed, hbm, pool plotter.Values
	for i, m := range r.Modes {
		names[i] = m.Mode
		row := e2eRow(r.Options, m)
		p := float64(max(row["prompt_tokens"].(int64), 1))
		hbm = append(hbm, float64(row["hit_hbm_tokens"].(int64))/p)
		pool = append(pool, float64(row["saved_tokens"].(int64)-row["hit_hbm_tokens"].(int64))/p)
		computed = append(computed, float64(row["computed_tokens"].(int64))/p)
	}
	w := vg.Points(28)
	var prev *plotter.BarChart
	for i, part := range []struct {
		name string
		v    plotter.Values
	}{{"computed", computed}, {"engine HBM hit", hbm}, {"yuebing hit", pool}} {
		bars, err := plotter.NewBarChart(part.v, w)
		if err != nil {
			return err
		}
		bars.Color = []color.Color{color.Gray{170}, colors[1], colors[2]}[i]
		bars.LineStyle.Width = 0
		if prev != nil {
			bars.StackOn(prev)
		}
		src.Add(bars)
		src.Legend.Add(part.name, bars)
		prev = bars
	}
	src.NominalX(names...)
	src.Legend.Top, src.Legend.Left = true, true
	const panelW, panelH = 4.4 * vg.Inch, 3.2 * vg.Inch
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	return bench.WritePNG(path, [][]*plot.Plot{{cdf, src}}, tiles, panelW, panelH, 100)
}
