package hitrate

import (
	"testing"

	"github.com/yuebing/yuebing/bench"
)

// Two blocks of DRAM over two of SSD: what each admission writes when a
// block is evicted once, read again, or evicted twice.
func TestTwoTierAdmission(t *testing.T) {
	f := func(admission string, seq []int32, wantWrites, wantHits int64) {
		t.Helper()
		c, err := NewTwoTierCache(admission, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range seq {
			c.Contains(id)
			c.Touch(id, bench.NoParent)
		}
		if c.SSDWrites != wantWrites || c.SSDHits != wantHits {
			t.Errorf("%s %v: %d writes, %d SSD hits; want %d, %d", admission, seq, c.SSDWrites, c.SSDHits, wantWrites, wantHits)
		}
	}
	once := []int32{1, 2, 3, 4}       // 1 and 2 evicted, never read again
	reused := []int32{1, 1, 2, 3, 4}  // 1 read again in DRAM before eviction
	back := []int32{1, 2, 3, 1, 4, 5} // 1 evicted, back from SSD (or recomputed), evicted again
	f(AdmitAll, once, 2, 0)
	f(AdmitReuse, once, 0, 0)
	f(AdmitSeenTwice, once, 0, 0)
	f(AdmitAll, reused, 2, 0)
	f(AdmitReuse, reused, 1, 0)
	// 1 is read from SSD, but 2's write after it leaves 1's SSD copy the
	// older: 3 displaces it, and 1's second eviction writes it again.
	f(AdmitAll, back, 4, 1)
	f(AdmitSeenTwice, back, 1, 0) // 1 missed, then admitted on its second eviction
	// An object tier under SSD takes what SSD evicts and serves it back.
	c, _ := NewTwoTierCache(AdmitAll, 1, 1)
	c.WithObjectTier(10)
	for _, id := range []int32{1, 2, 3, 1} {
		c.Contains(id)
		c.Touch(id, bench.NoParent)
	}
	if c.ObjPuts != 2 || c.ObjHits != 1 { // 1, then 2 when 1 comes back
		t.Errorf("object tier: %d puts, %d hits; want 2, 1", c.ObjPuts, c.ObjHits)
	}
	if _, err := NewTwoTierCache("maybe", 1, 1); err == nil {
		t.Error("unknown admission accepted")
	}
}

// Chains of three blocks through two blocks of DRAM over four of SSD: chain
// admission does not write a request's tail (3, 6), so a request repeating
// the first one whole hits two blocks instead of three; on the traces a tail
// is a partial block the next turn does not repeat.
func TestTwoTierChainAdmission(t *testing.T) {
	f := func(admission string, wantWrites, wantSSDHits int64, wantHits int) {
		t.Helper()
		c, err := NewTwoTierCache(admission, 2, 4)
		if err != nil {
			t.Fatal(err)
		}
		var hits int
		for _, req := range [][]int32{{1, 2, 3}, {4, 5, 6}, {1, 2, 3}} {
			hits = bench.ReplayRequest(req, c)
		}
		if c.SSDWrites != wantWrites || c.SSDHits != wantSSDHits || hits != wantHits {
			t.Errorf("%s: %d writes, %d SSD hits, last request hit %d; want %d, %d, %d",
				admission, c.SSDWrites, c.SSDHits, hits, wantWrites, wantSSDHits, wantHits)
		}
	}
	// all: 1 to 4, then 5 and 6 as the third request pushes them out (and
	// the SSD drops 2 before it is read: one SSD read of three hits).
	f(AdmitAll, 6, 1, 3)
	// chain: 1, 2, 4, then 5; the tails 3 and 6 are not written.
	f(AdmitChain, 4, 2, 2)
	f(AdmitLearned, 4, 2, 2) // no branch class has a history yet
	f(AdmitReturns, 4, 2, 2) // as learned
}

// The oracle reads the trace ahead: of the chains 1-2-3 and 4-5-6 through
// two blocks of DRAM over four of SSD, with 1-2-3 asked again, it writes
// only 1, 2 and 3, which the third request then reads whole from SSD; all
// wrote six blocks for one SSD hit, chain four for two.
func TestTwoTierOracleAdmission(t *testing.T) {
	reqs := [][]uint64{{11, 12, 13}, {14, 15, 16}, {11, 12, 13}}
	var br []bench.Request
	for _, ids := range reqs {
		br = append(br, bench.Request{InputLength: len(ids) * bench.TraceBlockTokens, HashIDs: ids})
	}
	tr, err := bench.NewTrace("t", br)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewTwoTierCache(AdmitOracle, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	res := bench.Replay(tr, c.WithTrace(tr))
	if c.SSDWrites != 3 || c.SSDHits != 3 || res.HitBlocks != 3 {
		t.Errorf("oracle: %d writes, %d SSD hits, %d hits; want 3, 3, 3", c.SSDWrites, c.SSDHits, res.HitBlocks)
	}
	// Without the trace it cannot see ahead, and writes nothing.
	c, _ = NewTwoTierCache(AdmitOracle, 2, 4)
	bench.Replay(tr, c)
	if c.SSDWrites != 0 {
		t.Errorf("oracle without its trace wrote %d blocks", c.SSDWrites)
	}
}
