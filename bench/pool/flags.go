package pool

import (
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/tier/policy"
)

// Flags are the settings of `yuebing bench pool` as written on its command
// line.
type Flags struct {
	Nodes int
	// Capacity is each node's cache as a token count ("3M").
	Capacity string
	Policy   string
}

// Options checks f, reporting every problem at once and naming its flag,
// and returns the options f sets (without traces).
func (f Flags) Options() (Options, error) {
	var errs []error
	if f.Nodes < 1 {
		errs = append(errs, fmt.Errorf("--nodes: %d, want at least 1", f.Nodes))
	}
	c, err := bench.ParseTokenCount(f.Capacity)
	if err != nil {
		errs = append(errs, fmt.Errorf("--capacity: %v", err))
	} else if c < bench.TraceBlockTokens {
		errs = append(errs, fmt.Errorf("--capacity: %s tokens is less than one %d-token block", f.Capacity, bench.TraceBlockTokens))
	}
	if _, err := policy.New[int](f.Policy, 1); err != nil {
		errs = append(errs, fmt.Errorf("--policy: %v", err))
	}
	return Options{Nodes: f.Nodes, NodeCapacity: c, Policy: f.Policy}, errors.Join(errs...)
}
