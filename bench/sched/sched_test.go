package sched

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"

	"github.com/yuebing/yuebing/scheduler"
)

// TestSchedOneRequest checks the simulator's clocks against the models
// directly: one request on an idle cluster has TTFT = its prefill estimate
// and TBT = one iteration of a batch of one, except its first interval,
// which is one iteration too (it joins an idle instance at once).
func TestSchedOneRequest(t *testing.T) {
	reqs := []bench.Request{{Timestamp: 0, InputLength: 2048, OutputLength: 11, HashIDs: []uint64{1, 2, 3, 4}}}
	tr, err := bench.NewTrace("one", reqs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Simulate(context.Background(), Options{Trace: tr, Prefill: 1, Decode: 1, Rejection: scheduler.RejectNone})
	if err != nil {
		t.Fatal(err)
	}
	wantTTFT := scheduler.DefaultPrefillModel().Estimate(2048, 0).Seconds()
	if len(res.TTFTs) != 1 || math.Abs(res.TTFTs[0]-wantTTFT) > 1e-9 {
		t.Fatalf("TTFTs %v, want [%v]", res.TTFTs, wantTTFT)
	}
	// The batch holds 2048 prompt tokens plus the first token's KV.
	wantTBT := scheduler.DefaultDecodeModel().Estimate(1, 2049).Seconds()
	if len(res.TBTs) != 1 || math.Abs(res.TBTs[0]-wantTBT) > 1e-9 {
		t.Fatalf("TBTs %v, want [%v]", res.TBTs, wantTBT)
	}
	if res.Effective != 1 || res.Rejected != 0 || res.HitBlocks != 0 || res.Blocks != 4 {
		t.Fatalf("result %+v", res)
	}
}

// TestSchedReuse replays a prompt twice: the second reuses the first's
// blocks from the cache of the instance that ran it, and its prefill is
// shorter by exactly what the model says.
func TestSchedReuse(t *testing.T) {
	reqs := []bench.Request{
		{Timestamp: 0, InputLength: 4096, OutputLength: 1, HashIDs: []uint64{1, 2, 3, 4, 5, 6, 7, 8}},
		{Timestamp: time.Minute, InputLength: 4608, OutputLength: 1, HashIDs: []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
	}
	tr, err := bench.NewTrace("reuse", reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []scheduler.Policy{scheduler.PolicyCacheGlobal, scheduler.PolicyCacheLocal} {
		res, err := Simulate(context.Background(), Options{Trace: tr, Prefill: 4, Decode: 1, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		if res.HitBlocks != 8 || res.Blocks != 17 {
			t.Errorf("%s: hit %d of %d blocks, want 8 of 17", p, res.HitBlocks, res.Blocks)
		}
		want := scheduler.DefaultPrefillModel().Estimate(4608, 4096).Seconds()
		if len(res.TTFTs) != 2 || math.Abs(res.TTFTs[1]-want) > 1e-9 {
			t.Errorf("%s: TTFTs %v, want the second %v", p, res.TTFTs, want)
		}
	}
}

// TestSchedConversation runs the default suite on the conversation trace:
// the cache-aware policies beat random and load balancing, the global pool
// beats local caches, and under overload prediction-based rejection swings
// less and serves more within SLO than early rejection. -short replays the
// first 3000 requests and checks the ordering of the policies only.
func TestSchedConversation(t *testing.T) {
	tr := benchtest.OpenTestTrace(t, "conversation_trace.jsonl")
	base := Options{Trace: tr}
	over := Options{Speed: DefaultOverloadSpeed, Prefill: DefaultOverloadPrefill, Decode: DefaultOverloadDecode}
	if testing.Short() {
		base.Requests = 3000
	}
	cells := Suite(base, over)
	if err := Run(context.Background(), cells, 0, false); err != nil {
		t.Fatal(err)
	}
	rows := map[string]bench.Row{}
	for _, row := range Report(cells).Results {
		rows[row["name"].(string)] = row
		t.Logf("%s: avg TTFT %.2f s, effective %.3f, load std %.3f/%.3f", row["name"], row["avg_ttft_s"], row["effective_capacity"], row["prefill_load_std"], row["decode_load_std"])
	}
	avg := func(name string) float64 { return rows[name]["avg_ttft_s"].(float64) }
	global, local := avg("cache-global/none"), avg("cache-local/none")
	if !(global < local && local < avg("load/none") && local < avg("random/none")) {
		t.Errorf("average TTFT: cache-global %.3f, cache-local %.3f, load %.3f, random %.3f; want them in that order", global, local, avg("load/none"), avg("random/none"))
	}
	if rows["cache-global/none"]["hit_rate"].(float64) <= rows["cache-local/none"]["hit_rate"].(float64) {
		t.Errorf("cache-global hits no more than cache-local")
	}
	if testing.Short() {
		return
	}
	if cut := 1 - global/local; cut < 0.14 {
		t.Errorf("cache-global cuts average TTFT by %.1f%% against cache-local; want at least 14%%", 100*cut)
	}
	early, pred := rows["overload/cache-global/early"], rows["overload/cache-global/predicted"]
	for _, f := range []string{"prefill_load_std", "decode_load_std"} {
		if pred[f].(float64) >= early[f].(float64) {
			t.Errorf("%s: predicted %.3f, early %.3f; want predicted smaller", f, pred[f], early[f])
		}
	}
	if pred["effective_capacity"].(float64) <= early["effective_capacity"].(float64) {
		t.Errorf("effective capacity: predicted %.3f, early %.3f; want predicted higher", pred["effective_capacity"], early["effective_capacity"])
	}
	none := rows["overload/cache-global/none"]
	if none["effective_capacity"].(float64) >= early["effective_capacity"].(float64) {
		t.Errorf("overloaded without rejection serves %.3f within SLO, early rejection %.3f; want fewer", none["effective_capacity"], early["effective_capacity"])
	}
}

func TestSchedOptions(t *testing.T) {
	o := Options{Prefill: -1, Speed: -2, CacheTokens: 10}
	o.EnsureDefaults()
	o.Prefill, o.Speed, o.CacheTokens = -1, -2, 10
	err := o.Validate()
	for _, want := range []string{"no trace", "prefill", "speed", "cache of 10 tokens"} {
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestSchedGlobalPool: blocks evicted from the only prefill instance's
// small cache are still reused through the global pool, by a pull.
func TestSchedGlobalPool(t *testing.T) {
	reqs := []bench.Request{
		{Timestamp: 0, InputLength: 2048, OutputLength: 1, HashIDs: []uint64{1, 2, 3, 4}},
		{Timestamp: time.Minute, InputLength: 2048, OutputLength: 1, HashIDs: []uint64{5, 6, 7, 8}},
		{Timestamp: 2 * time.Minute, InputLength: 2048, OutputLength: 1, HashIDs: []uint64{1, 2, 3, 4}},
	}
	tr, err := bench.NewTrace("pool", reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool        int64
		hits, pulls int
	}{{0, 0, 0}, {100 * bench.TraceBlockTokens, 4, 1}} {
		res, err := Simulate(context.Background(), Options{Trace: tr, Prefill: 1, Decode: 1, CacheTokens: 4 * bench.TraceBlockTokens, GlobalPool: tc.pool})
		if err != nil {
			t.Fatal(err)
		}
		if res.HitBlocks != int64(tc.hits) || res.Pulls != tc.pulls {
			t.Errorf("pool %d tokens: %d hit blocks, %d pulls; want %d and %d", tc.pool, res.HitBlocks, res.Pulls, tc.hits, tc.pulls)
		}
	}
}
