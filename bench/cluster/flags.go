package cluster

import (
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/server"
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
	for _, s := range []struct {
		name, v string
		dst     func(int64)
	}{
		{"dram-capacity", f.DRAMCapacity, func(n int64) { o.DRAMCapacity = n }},
		{"block-bytes", f.BlockBytes, func(n int64) { o.BlockBytes = int(n) }},
		{"get-size", f.GetSize, func(n int64) { o.GetSize = int(n) }},
	} {
		var n server.ByteSize
		if err := n.UnmarshalText([]byte(s.v)); err != nil {
			bad("--%s: %v", s.name, err)
			continue
		}
		s.dst(int64(n))
	}
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
