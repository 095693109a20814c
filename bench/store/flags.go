package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/yuebing/yuebing/bench"
)

// Flags are the settings of `yuebing bench store` as written on its command
// line: Options with the lists still as text.
type Flags struct {
	// Options holds the settings taken as they are (dir, duration,
	// quick); its Sizes, Goroutines and IndexEntries are set from the
	// fields below.
	Options
	// Sizes is a comma-separated list of byte sizes ("64KiB,1MiB"),
	// Goroutines one of counts; empty for the defaults.
	Sizes, Goroutines string
	// IndexEntries is a token-style count ("10M"); empty for the default.
	IndexEntries string
}

// MaxGoroutines bounds a concurrency level: more measures the scheduler,
// not the tiers.
const MaxGoroutines = 256

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	o.Sizes, o.Goroutines = nil, nil
	if f.Sizes != "" {
		for _, s := range strings.Split(f.Sizes, ",") {
			n, err := bench.ParseSize(s)
			if err != nil || n <= 0 {
				bad("--sizes: %q is not a block size like 64KiB or 1MiB", s)
				continue
			}
			o.Sizes = append(o.Sizes, n)
		}
	}
	if f.Goroutines != "" {
		for _, s := range strings.Split(f.Goroutines, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 || n > MaxGoroutines {
				bad("--goroutines: %q is not a count from 1 to %d", s, MaxGoroutines)
				continue
			}
			o.Goroutines = append(o.Goroutines, n)
		}
	}
	if f.IndexEntries != "" {
		// At least the 512-key chain the prefix match looks up.
		n, err := bench.ParseTokenCount(f.IndexEntries)
		if err != nil || n < 512 || n > 1<<31 {
			bad("--index-entries: %q is not a count from 512 to 2G", f.IndexEntries)
		} else {
			o.IndexEntries = int(n)
		}
	}
	if o.Duration < 0 {
		bad("--duration: must not be negative")
	}
	return o, errors.Join(errs...)
}
