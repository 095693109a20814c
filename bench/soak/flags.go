package soak

import (
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/bench"
)

// Flags are the settings of `yuebing bench soak` as written on its command
// line: Options with the sizes still as text and the --no-* switches.
type Flags struct {
	// Options holds the settings taken as they are; its sizes, Engines,
	// KillEvery, EngineKillEvery and DurableEvery are set from the fields
	// below.
	Options
	// DRAMCapacity, SSDCapacity, MaxInflightBytes, MinValue and MaxValue
	// are byte sizes ("64MiB").
	DRAMCapacity, SSDCapacity, MaxInflightBytes, MinValue, MaxValue string
	// NoKill and NoDurable turn node kills and durable puts off.
	NoKill, NoDurable bool
	// Engines is the number of engines; 0 runs none.
	Engines int
	// S3 are the --s3* settings, which set Options.S3.
	S3 S3Flags
	// ClusterSet says --cluster was given. Without it, an S3 tier runs the
	// cluster: the tier's outage is then seen by several nodes at once,
	// while the soak also kills them.
	ClusterSet bool
}

// Parse checks f, reporting every problem at once and naming its flag, and
// returns the options f sets.
func (f *Flags) Parse() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := f.Options
	var err error
	if o.S3, err = f.S3.Parse(); err != nil {
		errs = append(errs, err)
	}
	if o.S3.Enabled() && !f.ClusterSet {
		o.Cluster = true
	}
	errs = append(errs, bench.ParseSizes(
		bench.SizeFlag{Name: "dram-capacity", Text: f.DRAMCapacity, Set: func(n int64) { o.DRAMCapacity = n }},
		bench.SizeFlag{Name: "ssd-capacity", Text: f.SSDCapacity, Set: func(n int64) { o.SSDCapacity = n }},
		bench.SizeFlag{Name: "max-inflight-bytes", Text: f.MaxInflightBytes, Set: func(n int64) { o.MaxInflightBytes = n }},
		bench.SizeFlag{Name: "min-value", Text: f.MinValue, Set: func(n int64) { o.MinValue = int(n) }},
		bench.SizeFlag{Name: "max-value", Text: f.MaxValue, Set: func(n int64) { o.MaxValue = int(n) }},
	)...)
	if f.NoKill {
		o.KillEvery, o.EngineKillEvery = -1, -1
	} else if o.KillEvery <= 0 {
		bad("--kill-every: %s, want > 0 (or --no-kill)", o.KillEvery)
	} else if o.EngineKillEvery < 0 {
		bad("--engine-kill-every: %s, want > 0 (0: --kill-every)", o.EngineKillEvery)
	}
	switch {
	case f.Engines < 0:
		bad("--engines: %d, want 0 (none) or more", f.Engines)
	case f.Engines == 0:
		o.Engines = -1
	default:
		o.Engines = f.Engines
	}
	if f.NoDurable {
		o.DurableEvery = -1
	} else if o.DurableEvery <= 0 {
		bad("--durable-every: %s, want > 0 (or --no-durable)", o.DurableEvery)
	}
	if o.Duration <= 0 {
		bad("--duration: %s, want > 0", o.Duration)
	}
	if len(errs) > 0 {
		return o, errors.Join(errs...)
	}
	return o, bench.ValidateDefaulted(o, nil)
}
