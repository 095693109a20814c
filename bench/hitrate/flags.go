package hitrate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/tier/policy"
)

// PolicyNames are the eviction policies --policy may name, all of them by
// default.
var PolicyNames = policy.Names

// ParsePolicies splits --policy into its eviction policies, reporting every
// unknown one at once.
func ParsePolicies(s string) ([]string, error) {
	names := bench.SplitList(s)
	var errs []error
	for _, p := range names {
		if _, err := policy.New[int](p, 1); err != nil {
			errs = append(errs, fmt.Errorf("--policy: %v", err))
		}
	}
	return names, errors.Join(errs...)
}

// Flags are the settings of `yuebing bench hitrate` as written on its
// command line.
type Flags struct {
	// Capacities is a comma-separated list of token counts ("inf" for the
	// unbounded row only); SSDCapacity and S3Capacity are token counts,
	// empty for no such tier.
	Capacities, SSDCapacity, S3Capacity string
	// Admissions and Policies are comma-separated names.
	Admissions, Policies string
	Workers              int
	ThroughTier          bool
}

// Options checks f, reporting every problem at once and naming its flag,
// and returns the options f sets (without traces).
func (f Flags) Options() (Options, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	o := Options{Workers: f.Workers, Progress: true, ThroughTier: f.ThroughTier}
	for _, s := range bench.SplitList(f.Capacities) {
		if strings.EqualFold(s, "inf") {
			continue // the unbounded row is always reported
		}
		n, err := bench.ParseTokenCount(s)
		if err != nil {
			bad("--capacity: %v", err)
			continue
		}
		if n < bench.TraceBlockTokens {
			bad("--capacity: %s tokens is less than one %d-token block", s, bench.TraceBlockTokens)
			continue
		}
		o.Capacities = append(o.Capacities, n)
	}
	if o.Capacities == nil {
		o.Capacities = []int64{} // only "inf": just the unbounded rows
	}
	if f.S3Capacity != "" && f.SSDCapacity == "" {
		bad("--s3-capacity needs --ssd-capacity: the S3 tier takes what SSD evicts")
	}
	if f.SSDCapacity != "" {
		n, err := bench.ParseTokenCount(f.SSDCapacity)
		if err != nil {
			bad("--ssd-capacity: %v", err)
		} else if n < bench.TraceBlockTokens {
			bad("--ssd-capacity: %s tokens is less than one %d-token block", f.SSDCapacity, bench.TraceBlockTokens)
		}
		o.SSDCapacity = n
		if f.S3Capacity != "" {
			if o.S3Capacity, err = bench.ParseTokenCount(f.S3Capacity); err != nil || o.S3Capacity < bench.TraceBlockTokens {
				bad("--s3-capacity: %q: want a token count of at least one %d-token block", f.S3Capacity, bench.TraceBlockTokens)
			}
		}
		o.Admissions = bench.SplitList(f.Admissions)
		for _, a := range o.Admissions {
			if !slices.Contains(Admissions, a) {
				bad("--ssd-admission: %q: want one of %s", a, strings.Join(Admissions, ", "))
			}
		}
	}
	var err error
	if o.Policies, err = ParsePolicies(f.Policies); err != nil {
		errs = append(errs, err)
	}
	if f.Workers < 0 {
		bad("--workers: %d is negative", f.Workers)
	}
	return o, errors.Join(errs...)
}
