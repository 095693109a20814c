package hitrate

import (
	"errors"
	"fmt"

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
