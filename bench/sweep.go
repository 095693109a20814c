package bench

import (
	"context"
	"runtime"

	"golang.org/x/sync/errgroup"
)

// RunCells runs fn(i) for i in [0, n) on at most workers goroutines
// (GOMAXPROCS when workers <= 0) and returns the first error; after an error
// or a cancelled ctx no new cell starts. Cells are independent simulations,
// so a sweep scales with cores while memory stays bounded by the workers.
func RunCells(parent context.Context, n, workers int, fn func(i int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	g, ctx := errgroup.WithContext(parent)
	g.SetLimit(workers)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fn(i)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// The group's ctx ends with Wait; only the caller's says "cancelled".
	return parent.Err()
}
