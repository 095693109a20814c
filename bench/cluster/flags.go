package cluster

import (
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/bench"
)

// Flags are the settings of `yuebing bench cluster` as written on its
// command line: Options with the sizes and ranks still as text.
type Flags struct {
	// Options holds the settings taken as they are (nodes, requests, ...);
	// its DRAMCapacity, BlockBytes, GetSize and Ranks are set from the
	// fields below.
	Options
	// DRAMCapacity, BlockBytes and GetSize are byte sizes ("96MiB").
	DRAMCapacity, BlockBytes, GetSize string
	// Ranks is a comma-separated list of top-N sets.
	Ranks string
	// Every is the table's sample row stride.
	Every int
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets (without the trace, which the caller opens).
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	errs = append(errs, bench.ParseSizes(
		bench.SizeFlag{Name: "dram-capacity", Text: f.DRAMCapacity, Set: func(n int64) { o.DRAMCapacity = n }},
		bench.SizeFlag{Name: "block-bytes", Text: f.BlockBytes, Set: func(n int64) { o.BlockBytes = int(n) }},
		bench.SizeFlag{Name: "get-size", Text: f.GetSize, Set: func(n int64) { o.GetSize = int(n) }},
	)...)
	var err error
	if o.Ranks, err = bench.ParseRanks(f.Ranks, ""); err != nil {
		errs = append(errs, err)
	}
	if f.Every < 1 {
		bad("--every: %d, want at least 1", f.Every)
	}
	if len(errs) > 0 {
		return o, errors.Join(errs...)
	}
	return o, bench.ValidateDefaulted(o, func(c *Options) {
		if c.Trace == nil {
			c.Trace = &bench.Trace{}
		}
	})
}
