package bench

import "fmt"

// PlotE2ERouter draws the routed replay.
func PlotE2ERouter(r *E2ERouterResult, path string) error {
	return fmt.Errorf("todo")
}
