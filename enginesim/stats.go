package enginesim

import (
	"fmt"
	"io"
	"sort"
	"time"
)

// Stats are an engine's counters since New.
type Stats struct {
	Requests, Rejected, Completed, Failed int64
	// PromptTokens = LocalHitTokens + PoolHitTokens + ComputedTokens.
	PromptTokens, LocalHitTokens, PoolHitTokens, ComputedTokens int64
	// PoolTierTokens splits PoolHitTokens by the tier yuebing held them in.
	PoolTierTokens map[string]int64
	// RecomputedTokens were planned hits that failed to load.
	RecomputedTokens int64
	// SkippedLoadTokens were pool hits computed because loading them was
	// estimated to be slower (LoadIfFaster).
	SkippedLoadTokens int64
	// LoadBytesPerSecond is the load throughput the engine has learnt
	// (0 before its first load).
	LoadBytesPerSecond float64
	// WrongKV counts loaded layers whose bytes did not match their tokens
	// (never expected: the adapter verifies every layer).
	WrongKV int64
	// Offloaded counts blocks evicted from the pool and saved on the way.
	Offloaded       int64
	GeneratedTokens int64
	LoadBytes       int64
	// LoadTime is the sum of loads' durations; LoadStall the part the
	// prefills waited for.
	LoadTime, LoadStall time.Duration
	TTFTSum             time.Duration
}

// Stats returns the counters.
func (e *Engine) Stats() Stats {
	s := &e.st
	out := Stats{
		Requests: s.requests.Load(), Rejected: s.rejected.Load(), Completed: s.completed.Load(), Failed: s.failed.Load(),
		PromptTokens: s.promptTokens.Load(), LocalHitTokens: s.localHitTokens.Load(), PoolHitTokens: s.poolHitToks.Load(),
		ComputedTokens: s.computedTokens.Load(), RecomputedTokens: s.recomputed.Load(), WrongKV: s.wrongKV.Load(),
		SkippedLoadTokens: s.skippedLoad.Load(), LoadBytesPerSecond: e.loads.bytesPerSecond(),
		Offloaded: s.offloaded.Load(), GeneratedTokens: s.generated.Load(), LoadBytes: s.loadBytes.Load(),
		LoadTime: time.Duration(s.loadNanos.Load()), LoadStall: time.Duration(s.stallNanos.Load()), TTFTSum: time.Duration(s.ttftNanos.Load()),
		PoolTierTokens: map[string]int64{},
	}
	e.mu.Lock()
	for t, v := range e.mu.tiers {
		out.PoolTierTokens[t] = v
	}
	e.mu.Unlock()
	return out
}

// WriteMetrics writes the counters in the Prometheus text format.
func (e *Engine) WriteMetrics(w io.Writer) error {
	s := e.Stats()
	type m struct {
		name, help, kind string
		v                float64
	}
	ms := []m{
		{"enginesim_requests_total", "Requests accepted.", "counter", float64(s.Requests)},
		{"enginesim_rejected_total", "Requests refused with a full queue.", "counter", float64(s.Rejected)},
		{"enginesim_completed_total", "Requests finished.", "counter", float64(s.Completed)},
		{"enginesim_failed_total", "Requests ended by an error.", "counter", float64(s.Failed)},
		{"enginesim_prompt_tokens_total", "Prompt tokens prefilled.", "counter", float64(s.PromptTokens)},
		{"enginesim_local_hit_tokens_total", "Prompt tokens found in the engine's own prefix cache.", "counter", float64(s.LocalHitTokens)},
		{"enginesim_pool_hit_tokens_total", "Prompt tokens loaded from yuebing.", "counter", float64(s.PoolHitTokens)},
		{"enginesim_computed_tokens_total", "Prompt tokens computed.", "counter", float64(s.ComputedTokens)},
		{"enginesim_recomputed_tokens_total", "Planned hits that failed to load and were computed.", "counter", float64(s.RecomputedTokens)},
		{"enginesim_skipped_load_tokens_total", "Pool hits computed because loading them was estimated to be slower.", "counter", float64(s.SkippedLoadTokens)},
		{"enginesim_load_estimate_bytes_per_second", "Load throughput learnt from the loads done (0 before the first).", "gauge", s.LoadBytesPerSecond},
		{"enginesim_wrong_kv_total", "Loaded layers whose bytes did not match their tokens.", "counter", float64(s.WrongKV)},
		{"enginesim_offloaded_blocks_total", "Blocks saved to yuebing as the pool evicted them.", "counter", float64(s.Offloaded)},
		{"enginesim_generated_tokens_total", "Tokens generated.", "counter", float64(s.GeneratedTokens)},
		{"enginesim_load_bytes_total", "KV bytes loaded from yuebing.", "counter", float64(s.LoadBytes)},
		{"enginesim_load_seconds_total", "Time loads took.", "counter", s.LoadTime.Seconds()},
		{"enginesim_load_stall_seconds_total", "Time prefills waited for loads (the rest was hidden behind compute).", "counter", s.LoadStall.Seconds()},
		{"enginesim_ttft_seconds_total", "Sum of times to first token.", "counter", s.TTFTSum.Seconds()},
	}
	for _, x := range ms {
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %g\n", x.name, x.help, x.name, x.kind, x.name, x.v); err != nil {
			return err
		}
	}
	tiers := make([]string, 0, len(s.PoolTierTokens))
	for t := range s.PoolTierTokens {
		tiers = append(tiers, t)
	}
	sort.Strings(tiers)
	fmt.Fprintf(w, "# HELP enginesim_pool_hit_tier_tokens_total Prompt tokens loaded from yuebing, by tier.\n# TYPE enginesim_pool_hit_tier_tokens_total counter\n")
	for _, t := range tiers {
		if _, err := fmt.Fprintf(w, "enginesim_pool_hit_tier_tokens_total{tier=%q} %d\n", t, s.PoolTierTokens[t]); err != nil {
			return err
		}
	}
	return nil
}
