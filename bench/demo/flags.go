package demo

import (
	"errors"
	"fmt"
)

// Flags are the settings of `yuebing demo` as written on its command line.
type Flags struct {
	// Options holds the settings taken as they are.
	Options
}

// Parse checks f, reporting every problem at once, and returns the options
// f sets. Zero is Options' "default", but on the command line, where the
// defaults are already written out, it is a mistake, as is any count
// below it.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	o := f.Options
	check := o
	if o.Engines < 1 || o.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("--engines %d and --block-size %d must be positive", o.Engines, o.BlockSize))
		// Validate below is then about the other value only.
		check.Engines, check.BlockSize = max(check.Engines, 0), max(check.BlockSize, 0)
	}
	check.EnsureDefaults()
	if err := check.Validate(); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}
