package sched

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/scheduler"
)

// Flags are the settings of `yuebing bench sched` as written on its command
// line. Validate reports every problem at once, each naming its flag; Cells
// turns valid flags into the runs to make.
type Flags struct {
	// Policies and Rejections are comma-separated names (--policy,
	// --rejection); both empty and Custom false runs Suite.
	Policies, Rejections string
	// Custom runs the cross product even with no policy or rejection named
	// (--speed was given).
	Custom                    bool
	Prefill, Decode, Requests int
	OverloadPrefill           int
	OverloadDecode            int
	// Cache, GlobalPool and DecodeCapacity are token counts ("3M").
	Cache, GlobalPool, DecodeCapacity string
	Speed, OverloadSpeed              float64
	// Bandwidth is in Gbps.
	Bandwidth, Threshold float64
	TTFTSLO, TBTSLO, TD  time.Duration
	// PrefillProfile and DecodeProfile are CSV paths; empty for the
	// built-in models.
	PrefillProfile, DecodeProfile string
}

// options checks f and returns the options every cell shares.
func (f *Flags) options() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if f.Prefill < 1 || f.Decode < 1 || f.Prefill+f.Decode >= scheduler.MaxInstances {
		bad("--prefill, --decode: %d and %d; want at least 1 each and fewer than %d in all", f.Prefill, f.Decode, scheduler.MaxInstances)
	}
	if f.OverloadPrefill < 1 || f.OverloadDecode < 1 || f.OverloadPrefill+f.OverloadDecode >= scheduler.MaxInstances {
		bad("--overload-prefill, --overload-decode: %d and %d; want at least 1 each and fewer than %d in all", f.OverloadPrefill, f.OverloadDecode, scheduler.MaxInstances)
	}
	if f.Speed <= 0 || f.OverloadSpeed <= 0 {
		bad("--speed, --overload-speed: want > 0")
	}
	if f.Requests < 0 {
		bad("--requests: %d, want >= 0", f.Requests)
	}
	if f.Threshold < 1 {
		bad("--threshold: %v, want >= 1", f.Threshold)
	}
	if f.Bandwidth <= 0 {
		bad("--bandwidth: %v Gbps, want > 0", f.Bandwidth)
	}
	if f.TTFTSLO <= 0 || f.TBTSLO <= 0 || f.TD < 0 {
		bad("--ttft-slo, --tbt-slo: want > 0; --td: want >= 0")
	}
	o := Options{Prefill: f.Prefill, Decode: f.Decode, Speed: f.Speed, Requests: f.Requests}
	var err error
	if o.CacheTokens, err = bench.ParseTokenCount(f.Cache); err != nil {
		bad("--cache: %v", err)
	} else if o.CacheTokens < bench.TraceBlockTokens {
		bad("--cache: %s tokens is less than one %d-token block", f.Cache, bench.TraceBlockTokens)
	}
	if o.GlobalPool, err = bench.ParseTokenCount(f.GlobalPool); err != nil {
		bad("--global-pool: %v", err)
	} else if o.GlobalPool != 0 && o.GlobalPool < bench.TraceBlockTokens {
		bad("--global-pool: %s tokens is less than one block", f.GlobalPool)
	}
	if o.DecodeCapacity, err = bench.ParseTokenCount(f.DecodeCapacity); err != nil || o.DecodeCapacity < 1 {
		bad("--decode-capacity: %q, want a token count like 1.2M", f.DecodeCapacity)
	}
	o.Sched = scheduler.Options{
		BalancingThreshold: f.Threshold,
		TTFTSLO:            f.TTFTSLO,
		TBTSLO:             f.TBTSLO,
		Bandwidth:          f.Bandwidth * 1e9 / 8,
		DecodeTime:         f.TD,
	}
	if err := loadProfiles(&o.Sched, f.PrefillProfile, f.DecodeProfile); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// Validate reports every problem with f at once, each naming its flag.
func (f *Flags) Validate() error {
	_, err := f.Cells()
	return err
}

// Cells returns the runs f asks for, without their trace: the default
// suite, or the cross product of the named policies and rejections.
func (f *Flags) Cells() ([]Cell, error) {
	base, err := f.options()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	var cells []Cell
	if f.Policies == "" && f.Rejections == "" && !f.Custom {
		cells = Suite(base, Options{Speed: f.OverloadSpeed, Prefill: f.OverloadPrefill, Decode: f.OverloadDecode})
	} else {
		ps, rs := bench.SplitList(f.Policies), bench.SplitList(f.Rejections)
		if len(ps) == 0 {
			ps = []string{"cache-global"}
		}
		if len(rs) == 0 {
			rs = []string{"none"}
		}
		var policies []scheduler.Policy
		for _, pn := range ps {
			p, err := scheduler.ParsePolicy(pn)
			if err != nil {
				errs = append(errs, fmt.Errorf("--policy: %v", err))
			}
			policies = append(policies, p)
		}
		var rejections []scheduler.Rejection
		for _, rn := range rs {
			r, err := scheduler.ParseRejection(rn)
			if err != nil {
				errs = append(errs, fmt.Errorf("--rejection: %v", err))
			}
			rejections = append(rejections, r)
		}
		for _, p := range policies {
			for _, r := range rejections {
				o := base
				o.Policy, o.Rejection = p, r
				cells = append(cells, Cell{Experiment: "custom", Options: o})
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cells, nil
}

// loadProfiles reads the --prefill-profile and --decode-profile CSVs, when
// given, into o.
func loadProfiles(o *scheduler.Options, prefillPath, decodePath string) error {
	var errs []error
	if prefillPath != "" {
		f, err := os.Open(prefillPath)
		if err == nil {
			o.Prefill, err = scheduler.ParsePrefillProfile(f)
			f.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--prefill-profile: %v", err))
		}
	}
	if decodePath != "" {
		f, err := os.Open(decodePath)
		if err == nil {
			o.Decode, err = scheduler.ParseDecodeProfile(f)
			f.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--decode-profile: %v", err))
		}
	}
	return errors.Join(errs...)
}
