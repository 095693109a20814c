package e2e

import (
	"errors"
	"fmt"
	"strings"

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
