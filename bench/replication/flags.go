package replication

import (
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/bench"
)

// Flags are the settings of `yuebing bench replication` as written on its
// command line: Options with the capacity and ranks still as text.
type Flags struct {
	// Options holds the settings taken as they are (nodes, sample, rank
	// by, the core's); its NodeCapacity and Ranks are set from the fields
	// below.
	Options
	// Capacity is each node's cache as a token count ("3M").
	Capacity string
	// Ranks is a comma-separated list of ranks.
	Ranks string
	// Every is the table's sample row stride.
	Every int
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets (without the traces, which the caller opens).
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	c, err := bench.ParseTokenCount(f.Capacity)
	if err != nil {
		bad("--capacity: %v", err)
	}
	o.NodeCapacity = c
	if o.Ranks, err = bench.ParseRanks(f.Ranks, "1 is the most accessed key"); err != nil {
		errs = append(errs, err)
	}
	if f.Every < 1 {
		bad("--every: %d, want at least 1", f.Every)
	}
	if len(errs) > 0 {
		return o, errors.Join(errs...)
	}
	return o, bench.ValidateDefaulted(o, func(c *Options) {
		if len(c.Traces) == 0 {
			c.Traces = []*bench.Trace{{}}
		}
	})
}
