package e2e

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/yuebing/yuebing/scheduler"
)

// ParseRoutings splits --routing into the scheduler policies the router
// replay compares, reporting every unknown one at once.
func ParseRoutings(s string) ([]string, error) {
	var names []string
	var errs []error
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if _, err := scheduler.ParsePolicy(name); err != nil {
			errs = append(errs, fmt.Errorf("--routing: %q: want %s", name, scheduler.PolicyNames))
		}
		names = append(names, name)
	}
	return names, errors.Join(errs...)
}

// Flags are the settings of `yuebing bench e2e` as written on its command
// line: Options with the layout still a preset name.
type Flags struct {
	// Options holds the settings taken as they are; its Layout and Load
	// are set from the fields below.
	Options
	// Layout is a preset name, empty for the default; BlockTokens is its
	// tokens per block.
	Layout      string
	BlockTokens int
	Load        float64
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	for _, c := range []struct {
		name string
		v    int
	}{{"--engines", o.Engines}, {"--requests", o.Requests}, {"--max-input", o.MaxInput}, {"--max-output", o.MaxOutput}, {"--pool-blocks", o.PoolBlocks}, {"--rounds", o.Rounds}} {
		if c.v < 0 || c.v > 1<<20 {
			bad("%s: %d, want 1 to 1048576 (0 for the default)", c.name, c.v)
		}
	}
	if o.Scale < 0 || o.TimeScale < 0 || o.Compression < 0 || o.Duration < 0 {
		bad("--scale, --time-scale, --compression and --duration must not be negative")
	}
	if f.Layout != "" {
		l, err := PresetLayout(f.Layout, f.BlockTokens)
		if err != nil {
			bad("--layout: %v", err)
		}
		o.Layout = l
	}
	if f.Load < 0 || f.Load > 100 {
		bad("--load must be in (0, 100]")
	}
	o.Load = f.Load
	return o, errors.Join(errs...)
}

// RouterFlags are `yuebing bench e2e`'s flags for --router.
type RouterFlags struct {
	// Routings is a comma-separated list of policy names.
	Routings string
	TTFTSLO  time.Duration
	Pool     bool
	// Bandwidth is in Gbps.
	Bandwidth  float64
	Load       float64
	SideBySide bool
	Prompts    string
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the router replay's options around o.
func (f RouterFlags) Parse(o Options, log io.Writer) (RouterOptions, error) {
	var errs []error
	ro := RouterOptions{Options: o, TTFTSLO: f.TTFTSLO, Pool: f.Pool, Bandwidth: f.Bandwidth * 1e9 / 8, SideBySide: f.SideBySide, Log: log, Prompts: f.Prompts}
	if f.Prompts != PromptsIDs && f.Prompts != PromptsChat {
		errs = append(errs, fmt.Errorf("--prompts: %q: want ids or chat", f.Prompts))
	}
	var err error
	if ro.Routings, err = ParseRoutings(f.Routings); err != nil {
		errs = append(errs, err)
	}
	if f.TTFTSLO < 0 || f.Bandwidth < 0 || f.Load < 0 || f.Load > 100 {
		errs = append(errs, errors.New("--ttft-slo and --bandwidth must not be negative, --load must be in (0, 100]"))
	}
	return ro, errors.Join(errs...)
}
