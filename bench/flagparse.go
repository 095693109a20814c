package bench

import (
	"errors"
	"fmt"
	"strconv"
)

// ParseRanks reads a --ranks list: comma-separated ranks, 1 being the most
// accessed key. Every bad item is reported at once, naming the flag; hint,
// when not empty, follows each message in parentheses so that a harness can
// say what its ranks mean.
func ParseRanks(s, hint string) ([]int, error) {
	var ranks []int
	var errs []error
	for _, item := range SplitList(s) {
		r, err := strconv.Atoi(item)
		if err != nil || r < 1 {
			if hint != "" {
				errs = append(errs, fmt.Errorf("--ranks: %q is not a rank (%s)", item, hint))
			} else {
				errs = append(errs, fmt.Errorf("--ranks: %q is not a rank", item))
			}
			continue
		}
		ranks = append(ranks, r)
	}
	return ranks, errors.Join(errs...)
}

// ValidateDefaulted checks a harness's options as its run will see them: a
// defaulted copy of o, with standIn (if not nil) filling what the harness
// opens only later, such as its traces, so that Validate checks the rest
// before anything is opened. o itself is left as the flags set it.
func ValidateDefaulted[T any, P interface {
	*T
	EnsureDefaults()
	Validate() error
}](o T, standIn func(*T)) error {
	check := o
	P(&check).EnsureDefaults()
	if standIn != nil {
		standIn(&check)
	}
	return P(&check).Validate()
}
