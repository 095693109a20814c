package e2e

import (
	"testing"

	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestFlagsParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Flags
		want []string
	}{
		{"ok", Flags{Load: 0.7}, nil},
		{"counts", Flags{Options: Options{Engines: -1, Rounds: 1<<20 + 1}}, []string{
			"--engines: -1, want 1 to 1048576 (0 for the default)", "--rounds: 1048577"}},
		{"negative and load", Flags{Options: Options{Scale: -1}, Load: 101}, []string{
			"--scale, --time-scale, --compression and --duration must not be negative", "--load must be in (0, 100]"}},
		{"layout", Flags{Layout: "no-such-model", BlockTokens: 512}, []string{"--layout: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.f.Parse()
			if tc.want == nil {
				if err != nil || o.Load != tc.f.Load {
					t.Fatalf("%+v, %v", o, err)
				}
				return
			}
			benchtest.WantErrors(t, err, tc.want...)
		})
	}
}

func TestRouterFlagsParse(t *testing.T) {
	ok := RouterFlags{Routings: "conductor,round_robin", Prompts: PromptsIDs, Bandwidth: 8}
	if ro, err := ok.Parse(Options{}, nil); err != nil || len(ro.Routings) != 2 || ro.Bandwidth != 1e9 {
		t.Fatalf("%+v, %v", ro, err)
	}
	bad := RouterFlags{Routings: "conductor,nope", Prompts: "text", TTFTSLO: -1}
	_, err := bad.Parse(Options{}, nil)
	benchtest.WantErrors(t, err, `--prompts: "text": want ids or chat`, `--routing: "nope"`, "--ttft-slo and --bandwidth must not be negative")
}
