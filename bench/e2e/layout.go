package e2e

import "github.com/yuebing/yuebing/adapter"

// PresetLayout returns the adapter preset named by --layout with
// blockTokens tokens per block, for Options.Layout.
func PresetLayout(name string, blockTokens int) (adapter.Layout, error) {
	return adapter.Preset(name, blockTokens)
}
