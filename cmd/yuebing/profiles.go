package main

import (
	"os"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/scheduler"
)

// loadProfiles reads the --prefill-profile and --decode-profile CSVs, when
// given, into the scheduler options of `bench sched`.
func loadProfiles(o *scheduler.Options, prefillPath, decodePath string) error {
	if prefillPath != "" {
		f, err := os.Open(prefillPath)
		if err != nil {
			return usageErrorf("--prefill-profile: %v", err)
		}
		o.Prefill, err = scheduler.ParsePrefillProfile(f)
		f.Close()
		if err != nil {
			return usageErrorf("--prefill-profile: %v", err)
		}
	}
	if decodePath != "" {
		f, err := os.Open(decodePath)
		if err != nil {
			return usageErrorf("--decode-profile: %v", err)
		}
		o.Decode, err = scheduler.ParseDecodeProfile(f)
		f.Close()
		if err != nil {
			return usageErrorf("--decode-profile: %v", err)
		}
	}
	return nil
}

// adapterPreset is adapter.Preset, for the bench commands' --layout.
func adapterPreset(name string, blockTokens int) (adapter.Layout, error) {
	return adapter.Preset(name, blockTokens)
}
