package bench_test

import (
	"math"
	"testing"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"
)

func TestReplayModel(t *testing.T) {
	// Prefix hits stop at the first miss even when later blocks are cached.
	tr := benchtest.MustTrace(t,
		benchtest.Req(1, 2, 3),
		benchtest.Req(1, 4),       // 1 hits
		benchtest.Req(1, 2, 3, 5), // 1 2 3 hit
		benchtest.Req(6),
	)
	f := func(c bench.ReplayCache, wantHits int64) {
		t.Helper()
		res := bench.Replay(tr, c)
		if res.Requests != 4 || res.Blocks != 10 || res.HitBlocks != wantHits {
			t.Fatalf("replay: %d requests, %d blocks, %d hits; want 4, 10, %d", res.Requests, res.Blocks, res.HitBlocks, wantHits)
		}
	}
	f(bench.NewUnboundedCache(tr.Blocks()), 4)
	lru, err := bench.NewPolicyCache("lru", 3, tr.Blocks())
	if err != nil {
		t.Fatal(err)
	}
	// LRU of 3 blocks: request 2 hits 1, and inserting 4 evicts 2, the least
	// recent; request 3 then hits only 1, although 3 is still cached.
	f(lru, 2)

	// Blocks present after a miss are not hits: hold 2 and 3 but not 1.
	c := bench.NewUnboundedCache(tr.Blocks())
	ids, _ := tr.Request(0)
	c.Touch(ids[1], bench.NoParent)
	c.Touch(ids[2], bench.NoParent)
	if got := bench.PrefixHits(ids, c); got != 0 {
		t.Fatalf("PrefixHits without the first block = %d, want 0", got)
	}
}

func TestReplayResultPartialBlock(t *testing.T) {
	var r bench.ReplayResult
	r.Add(1000, 2, 2) // 1000 tokens in two blocks, all hit: 1000 tokens, not 1024
	r.Add(1024, 2, 1)
	if r.HitTokens != 1000+512 || r.InputTokens != 2024 {
		t.Fatalf("hit tokens %d of %d, want 1512 of 2024", r.HitTokens, r.InputTokens)
	}
	want := (bench.PrefillFLOPs(1000) + bench.PrefillFLOPs(512)) / (bench.PrefillFLOPs(1000) + bench.PrefillFLOPs(1024))
	if math.Abs(r.ComputeSaved()-want) > 1e-12 {
		t.Fatalf("compute saved %v, want %v", r.ComputeSaved(), want)
	}
	if r.HitRate() != 0.75 {
		t.Fatalf("hit rate %v, want 0.75", r.HitRate())
	}
}

func TestPrefillFLOPs(t *testing.T) {
	// l*(a*n^2*d + b*n*d^2) with LLaMA3-70B's l=80, d=8192, a=4, b=22.
	for _, tc := range []struct {
		n    int64
		want float64
	}{
		{0, 0},
		{1, 80 * (4*8192 + 22*8192*8192)},
		{8192, 80 * (4*8192*8192*8192 + 22*8192*8192.0*8192)},
	} {
		if got := bench.PrefillFLOPs(tc.n); got != tc.want {
			t.Errorf("PrefillFLOPs(%d) = %g, want %g", tc.n, got, tc.want)
		}
	}
	// Attention makes compute superlinear: reusing half a prompt saves
	// less than half of its compute.
	if bench.PrefillFLOPs(4096)/bench.PrefillFLOPs(8192) >= 0.5 {
		t.Error("half the tokens cost half the FLOPs or more")
	}
}
