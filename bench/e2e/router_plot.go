package e2e

import (
	"fmt"
	"image/color"
	"net/http"

	"github.com/yuebing/yuebing/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// routingColors keeps each routing's colour across the panels.
var routingColors = []color.Color{color.RGBA{200, 60, 60, 255}, color.RGBA{60, 100, 200, 255}, color.RGBA{40, 150, 70, 255}, color.RGBA{150, 100, 30, 255}}

// PlotRouter draws a routed replay in three panels: the TTFT
// distribution of each routing (a CDF, the SLO as a dashed line), the
// router's predicted TTFT against the observed one per request, and per
// routing the share of prompt tokens served from the engine's cache, the
// effective capacity (requests served within the SLO) and the share
// rejected. It writes a PNG to path.
func PlotRouter(r *RouterResult, path string) error {
	if len(r.Routings) == 0 {
		return fmt.Errorf("%w: nothing to plot", bench.ErrOptions)
	}
	o := r.Options
	cdf := plot.New()
	cdf.Title.Text = fmt.Sprintf("TTFT through the router, %d engines, %d requests", o.Engines, len(r.Routings[0].Requests))
	cdf.X.Label.Text = "TTFT (s)"
	cdf.Y.Label.Text = "fraction of requests served"
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.Legend.Top, cdf.Legend.Left = false, false
	cdf.Add(plotter.NewGrid())

	scatter := plot.New()
	scatter.Title.Text = "router's predicted TTFT against observed"
	scatter.X.Label.Text = "observed TTFT (s)"
	scatter.Y.Label.Text = "predicted TTFT (s)"
	scatter.Legend.Top, scatter.Legend.Left = true, true
	scatter.Add(plotter.NewGrid())
	var maxT float64

	for i, rr := range r.Routings {
		c := routingColors[i%len(routingColors)]
		ttft := rr.served()
		pts := make(plotter.XYs, len(ttft))
		for j, t := range ttft {
			pts[j] = plotter.XY{X: t.Seconds(), Y: float64(j+1) / float64(len(ttft))}
			maxT = max(maxT, t.Seconds())
		}
		if len(pts) > 0 {
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color, line.Width = c, vg.Points(1.5)
			cdf.Add(line)
			cdf.Legend.Add(rr.Routing, line)
		}
		var pv plotter.XYs
		for _, q := range rr.Requests {
			if q.Status == http.StatusOK && q.Predicted > 0 {
				pv = append(pv, plotter.XY{X: q.TTFT.Seconds(), Y: q.Predicted.Seconds()})
				maxT = max(maxT, q.Predicted.Seconds())
			}
		}
		if len(pv) > 0 {
			sc, err := plotter.NewScatter(pv)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Radius = c, vg.Points(1.6)
			scatter.Add(sc)
			scatter.Legend.Add(rr.Routing, sc)
		}
	}
	slo := o.slo.Seconds()
	if slo > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: slo, Y: 0}, {X: slo, Y: 1}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = color.Gray{90}, []vg.Length{vg.Points(4), vg.Points(3)}
		cdf.Add(l)
		cdf.Legend.Add("TTFT SLO", l)
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: maxT, Y: maxT}})
	if err != nil {
		return err
	}
	diag.Color, diag.Dashes = color.Gray{90}, []vg.Length{vg.Points(4), vg.Points(3)}
	scatter.Add(diag)
	scatter.Legend.Add("predicted = observed", diag)
	scatter.X.Min, scatter.Y.Min, scatter.X.Max, scatter.Y.Max = 0, 0, maxT, maxT

	bars := plot.New()
	bars.Title.Text = "cache hits, effective capacity, rejections"
	bars.Y.Label.Text = "share"
	bars.Y.Min, bars.Y.Max = 0, 1.35 // headroom for the legend
	names := make([]string, len(r.Routings))
	var hit, capacity, rejected plotter.Values
	for i, rr := range r.Routings {
		names[i] = rr.Routing
		row := e2eRouterRow(o, rr)
		hit = append(hit, row["hit_frac"].(float64))
		capacity = append(capacity, row["effective_capacity"].(float64))
		rejected = append(rejected, float64(row["rejected"].(int))/float64(max(1, len(rr.Requests))))
	}
	w := vg.Points(14)
	for i, part := range []struct {
		name string
		v    plotter.Values
		c    color.Color
	}{
		{"prompt tokens from cache", hit, color.RGBA{60, 100, 200, 255}},
		{"served within SLO", capacity, color.RGBA{40, 150, 70, 255}},
		{"rejected (429)", rejected, color.RGBA{200, 60, 60, 255}},
	} {
		b, err := plotter.NewBarChart(part.v, w)
		if err != nil {
			return err
		}
		b.Color, b.LineStyle.Width = part.c, 0
		b.Offset = vg.Length(i-1) * w
		bars.Add(b)
		bars.Legend.Add(part.name, b)
	}
	bars.NominalX(names...)
	bars.Legend.Top, bars.Legend.Left = true, true

	const panelW, panelH = 4.2 * vg.Inch, 3.2 * vg.Inch
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	return bench.WritePNG(path, [][]*plot.Plot{{cdf, scatter, bars}}, tiles, panelW, panelH, 100)
}
