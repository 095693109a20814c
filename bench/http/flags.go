package http

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/yuebing/yuebing/bench"
)

// The flags' bounds, as their messages state them. maxWeight keeps the
// mix's sum far from overflowing the draw between gets and puts.
const (
	maxValueSize   = 1 << 30
	maxConcurrency = 1024
	maxWeight      = 1 << 20
)

// Flags are the settings of `yuebing bench http` as written on its command
// line: Options with the sizes and the mix still as text.
type Flags struct {
	// Options holds the settings taken as they are; its ValueSize,
	// GetWeight, PutWeight and Node.DRAMCapacity are set from the fields
	// below.
	Options
	// ValueSize and DRAMCapacity are byte sizes ("4MiB"); DRAMCapacity
	// is read only without Options.Addr, when Run starts the node.
	ValueSize, DRAMCapacity string
	// Mix is the GET:PUT weights ("90:10").
	Mix string
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	if n, err := bench.ParseSize(f.ValueSize); err != nil || n < 1 || n > maxValueSize {
		bad("--value-size: %q is not a size from 1B to 1GiB", f.ValueSize)
	} else {
		o.ValueSize = n
	}
	g, p, ok := strings.Cut(f.Mix, ":")
	gw, gerr := strconv.Atoi(strings.TrimSpace(g))
	pw, perr := strconv.Atoi(strings.TrimSpace(p))
	if !ok || gerr != nil || perr != nil || gw < 0 || pw < 0 || gw+pw == 0 || gw+pw > maxWeight {
		bad("--mix: %q is not GET:PUT weights like 1:0, 90:10 or 0:1", f.Mix)
	} else {
		o.GetWeight, o.PutWeight = gw, pw
	}
	if o.Concurrency < 1 || o.Concurrency > maxConcurrency {
		bad("--concurrency: %d, want 1 to %d", o.Concurrency, maxConcurrency)
	}
	// Zero is the default (5s), not a request for no measurement.
	if o.Duration < 0 {
		bad("--duration: %v, want a positive duration like 10s", o.Duration)
	}
	if o.Addr == "" {
		n, err := bench.ParseSize(f.DRAMCapacity)
		if err != nil {
			bad("--dram-capacity: %v", err)
		}
		o.Node.DRAMCapacity = n
	}
	return o, errors.Join(errs...)
}
