package python

import (
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/bench"
)

// minDRAM is the smallest DRAM tier the flags take: what one contender
// moves in a round at the benchmark's default --bytes (64MiB) stays in DRAM.
const minDRAM = 64 << 20

// Flags are the settings of `yuebing bench python` as written on its
// command line: Options with the DRAM tier still as text.
type Flags struct {
	// Options holds the settings taken as they are; its DRAMCapacity is
	// set from the field below.
	Options
	// DRAMCapacity is a byte size ("512MiB").
	DRAMCapacity string
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	if checkPackage(o.PythonDir) != nil {
		bad("--python-dir: %s has no yuebing package (run from the repository root or point it at python/)", o.PythonDir)
	}
	if o.Rounds < 0 {
		bad("--rounds must not be negative")
	}
	if n, err := bench.ParseSize(f.DRAMCapacity); err != nil || n < minDRAM {
		bad("--dram-capacity: %q: want a size like 512MiB, at least 64MiB", f.DRAMCapacity)
	} else {
		o.DRAMCapacity = n
	}
	return o, errors.Join(errs...)
}
