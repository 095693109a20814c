package hitrate

import (
	"math/rand/v2"
	"testing"

	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/bench/benchtest"

	"github.com/yuebing/yuebing/tier/policy"
)

// randomChainTrace makes a tiny trace of prefix chains: each request
// extends or branches off an earlier one, or starts a new chain, so ids
// are real prefix hashes.
func randomChainTrace(t *testing.T, rng *rand.Rand, requests int) *bench.Trace {
	var (
		reqs   []bench.Request
		nextID uint64
	)
	for range requests {
		var ids []uint64
		if len(reqs) > 0 && rng.IntN(3) != 0 {
			base := reqs[rng.IntN(len(reqs))].HashIDs
			ids = append(ids, base[:1+rng.IntN(len(base))]...)
		}
		for range rng.IntN(3) {
			ids = append(ids, nextID)
			nextID++
		}
		if len(ids) == 0 {
			ids = append(ids, nextID)
			nextID++
		}
		reqs = append(reqs, benchtest.Req(ids...))
	}
	return benchtest.MustTrace(t, reqs...)
}

// bruteForce tries every choice of victim at every eviction of the replay
// model and returns the most present hits (cached blocks at their access)
// and the most prefix hits any eviction schedule can get.
func bruteForce(tr *bench.Trace, capacity int) (present, prefix int) {
	var stream []int32 // block accesses in order
	var starts []bool  // whether an access starts a request
	for i := range tr.Requests() {
		ids, _ := tr.Request(i)
		for j, id := range ids {
			stream = append(stream, id)
			starts = append(starts, j == 0)
		}
	}
	cached := make([]bool, tr.Blocks())
	var walk func(pos, used, pres, pref int, inPrefix bool)
	walk = func(pos, used, pres, pref int, inPrefix bool) {
		if pos == len(stream) {
			present, prefix = max(present, pres), max(prefix, pref)
			return
		}
		id := stream[pos]
		if starts[pos] {
			inPrefix = true
		}
		if cached[id] {
			p := pref
			if inPrefix {
				p++
			}
			walk(pos+1, used, pres+1, p, inPrefix)
			return
		}
		inPrefix = false
		if used < capacity {
			cached[id] = true
			walk(pos+1, used+1, pres, pref, inPrefix)
			cached[id] = false
			return
		}
		for v := range cached {
			if !cached[v] {
				continue
			}
			cached[v], cached[id] = false, true
			walk(pos+1, used, pres, pref, inPrefix)
			cached[v], cached[id] = true, false
		}
	}
	walk(0, 0, 0, 0, false)
	return present, prefix
}

// TestBeladyBruteForce checks MIN against every eviction schedule on tiny
// traces: it gets the most present hits there are, its prefix hits are
// bounded by that, and no policy gets more prefix hits than the best
// schedule does.
func TestBeladyBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for iter := range 150 {
		tr := randomChainTrace(t, rng, 3+rng.IntN(5))
		if tr.Accesses() > 16 {
			continue
		}
		capacity := 1 + rng.IntN(3)
		bestPresent, bestPrefix := bruteForce(tr, capacity)
		b, err := newBeladyCache(tr, int64(capacity))
		if err != nil {
			t.Fatal(err)
		}
		res := bench.Replay(tr, b)
		if int(b.PresentHits) != bestPresent {
			t.Fatalf("iter %d, capacity %d: MIN has %d present hits, brute force %d", iter, capacity, b.PresentHits, bestPresent)
		}
		if int(res.HitBlocks) > bestPrefix || bestPrefix > bestPresent {
			t.Fatalf("iter %d: MIN prefix hits %d, best schedule %d, best present %d", iter, res.HitBlocks, bestPrefix, bestPresent)
		}
		for _, name := range policy.Names {
			pc, err := bench.NewPolicyCache(name, int64(capacity), tr.Blocks())
			if err != nil {
				t.Fatal(err)
			}
			if got := bench.Replay(tr, pc).HitBlocks; int(got) > bestPrefix {
				t.Fatalf("iter %d: %s got %d prefix hits, more than the best schedule's %d", iter, name, got, bestPrefix)
			}
		}
	}
}

func TestBeladyOutOfOrderPanics(t *testing.T) {
	tr := benchtest.MustTrace(t, benchtest.Req(1, 2))
	b, _ := newBeladyCache(tr, 1)
	defer func() {
		if recover() == nil {
			t.Error("touching out of trace order did not panic")
		}
	}()
	b.Touch(1, bench.NoParent)
}
