package router

import (
	"cmp"
	"errors"
)

// Flags are the settings of `yuebing bench router` as written on its
// command line.
type Flags struct {
	// Options holds the settings taken as they are; zero is the default.
	Options
	// Quick sends 200 requests per path, whatever Requests says.
	Quick bool
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	o := f.Options
	if o.Requests < 0 || o.PromptTokens < 0 {
		errs = append(errs, errors.New("--requests and --prompt-tokens must be positive"))
	}
	if f.Quick {
		o.Requests = 200
	}
	return o, errors.Join(errs...)
}

// Ticks is the Progress total of Run: one per request on each path.
func Ticks(o Options) int64 { return 2 * int64(cmp.Or(o.Requests, 2000)) }
