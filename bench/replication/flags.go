package replication

import (
	"errors"
	"fmt"
	"strconv"

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
	o.Ranks = nil
	for _, s := range bench.SplitList(f.Ranks) {
		r, err := strconv.Atoi(s)
		if err != nil || r < 1 {
			bad("--ranks: %q is not a rank (1 is the most accessed key)", s)
			continue
		}
		o.Ranks = append(o.Ranks, r)
	}
	if f.Every < 1 {
		bad("--every: %d, want at least 1", f.Every)
	}
	if len(errs) > 0 {
		return o, errors.Join(errs...)
	}
	// The traces are opened later; a stand-in lets Validate check the rest.
	check := o
	check.EnsureDefaults()
	if len(check.Traces) == 0 {
		check.Traces = []*bench.Trace{{}}
	}
	return o, check.Validate()
}
