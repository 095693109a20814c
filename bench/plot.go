package bench

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PolicyColor picks distinguishable colors (mostly Okabe-Ito, safe for
// color blindness) in order; red is kept for the prefix policy.
func PolicyColor(i int) color.Color {
	palette := []color.RGBA{
		{0, 114, 178, 255}, {230, 159, 0, 255}, {0, 158, 115, 255}, {86, 180, 233, 255},
		{120, 60, 160, 255}, {204, 121, 167, 255}, {100, 100, 100, 255},
	}
	return palette[max(i, 0)%len(palette)]
}

// WritePNG lays out plots[row][col] as tiles of panelW x panelH each and
// writes the image to path as a PNG.
func WritePNG(path string, plots [][]*plot.Plot, tiles draw.Tiles, panelW, panelH vg.Length, dpi int) error {
	img := vgimg.NewWith(vgimg.UseWH(panelW*vg.Length(tiles.Cols), panelH*vg.Length(tiles.Rows)), vgimg.UseDPI(dpi))
	canvases := plot.Align(plots, tiles, draw.New(img))
	for i, row := range plots {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: plot: %w", err)
	}
	return f.Close()
}
