package router

import (
	"strconv"
	"testing"
	"time"

	"github.com/yuebing/yuebing/scheduler"
)

// TestRouterPolicies places the same prompt four times under each policy:
// the conductor reuses the prefix its first decision cached (on that
// engine, or pulled from it), round robin takes the engines in turn and
// reuses it only when its turn comes back to the engine that ran it. Every
// answer names its engine, the predicted TTFT and the counted prefix.
func TestRouterPolicies(t *testing.T) {
	const n = 8 * testBS
	for _, tc := range []struct {
		policy  string
		engines []string // "" for any
		prefix  []int
	}{
		{"conductor", []string{"a", "", "", ""}, []int{0, n, n, n}},
		{"round_robin", []string{"a", "b", "c", "a"}, []int{0, 0, 0, n}},
		{"least_loaded", []string{"a", "b", "c", ""}, []int{0, 0, 0, -1}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p, err := scheduler.ParsePolicy(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			var engines []Engine
			for _, id := range []string{"a", "b", "c"} {
				engines = append(engines, Engine{ID: id, URL: newSimEngine(t).srv.URL})
			}
			r := startRouter(t, Options{Engines: engines, ProbeInterval: 10 * time.Minute,
				Scheduler: scheduler.Options{Policy: p, Rejection: scheduler.RejectNone}})
			toks := prompt(11, 8)
			for i := range tc.engines {
				w, err := serve(t, r, body(t, toks, i%2 == 0))
				if err != nil {
					t.Fatal(err)
				}
				h := w.Header()
				if got, want := h.Get(HeaderEngine), tc.engines[i]; got == "" || want != "" && got != want {
					t.Fatalf("request %d on %q, want %q", i, got, want)
				}
				if pred, err := strconv.ParseFloat(h.Get(HeaderPredictedTTFT), 64); err != nil || pred <= 0 {
					t.Fatalf("request %d: predicted TTFT %q", i, h.Get(HeaderPredictedTTFT))
				}
				prefix, err := strconv.Atoi(h.Get(HeaderPrefixTokens))
				if err != nil || tc.prefix[i] >= 0 && prefix != tc.prefix[i] {
					t.Fatalf("request %d: prefix tokens %q, want %d", i, h.Get(HeaderPrefixTokens), tc.prefix[i])
				}
			}
		})
	}
}
