package scheduler

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yuebing/yuebing/block"
)

// benchCluster is the speed goal's setup: 16 instances (8 prefill, 8
// decode) and 64 prompts of 512 blocks; each prefill instance holds a
// random prefix of each prompt, and one holds the whole prompt, so every
// match walks all 512 keys.
var benchChains = 64

func benchCluster(b *testing.B) (*Core, [][]block.Key, [][]int) {
	c, err := NewCore(Options{BlockSize: 512})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 8 {
		if err := c.AddInstance(Instance{ID: "p" + strconv.Itoa(i), Role: RolePrefill}, 0); err != nil {
			b.Fatal(err)
		}
		if err := c.AddInstance(Instance{ID: "d" + strconv.Itoa(i), Role: RoleDecode}, 0); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	chains := make([][]block.Key, benchChains)
	held := make([][]int, benchChains) // held[chain][instance]: prefix length
	for ci := range chains {
		chains[ci] = testChain("chain"+strconv.Itoa(ci)+"-", 512)
		held[ci] = make([]int, 8)
		full := rng.IntN(8)
		for i := range 8 {
			n := rng.IntN(513)
			if i == full {
				n = 512
			}
			held[ci][i] = n
			if err := c.UpdateBlocks("p"+strconv.Itoa(i), BlockUpdate{Added: chains[ci][:n]}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return c, chains, held
}

// BenchmarkSchedule measures whole decisions (Algorithm 1, decode
// selection, rejection check, bookkeeping) on one core. The goal is
// 50,000 decisions per second.
func BenchmarkSchedule(b *testing.B) {
	c, chains, _ := benchCluster(b)
	b.ReportAllocs()
	var (
		now  time.Duration
		i    int
		live []string
	)
	for b.Loop() {
		// 20 ms between arrivals keeps queues short, as in a cluster
		// that meets its SLOs; requests finish 64 decisions later so the
		// decode batches stay a realistic size.
		now += 20 * time.Millisecond
		d, err := c.Schedule(Request{ID: strconv.Itoa(i), Keys: chains[i%len(chains)], InputTokens: 512 * 512}, now)
		if err != nil {
			b.Fatal(err)
		}
		if d.Accepted() {
			live = append(live, d.RequestID)
		}
		if len(live) > 64 {
			if err := c.Finished(live[0], now); err != nil {
				b.Fatal(err)
			}
			live = live[1:]
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkPrefixMatch compares two ways to find every prefill instance's
// prefix length of a 512-block prompt: holders (one map of key -> instance
// bitset, one pass over the chain) and roaring (keys interned to dense
// ids, a roaring bitmap per instance, a walk per instance).
func BenchmarkPrefixMatch(b *testing.B) {
	c, chains, held := benchCluster(b)
	b.Run("holders", func(b *testing.B) {
		var i int
		for b.Loop() {
			c.holders.match(chains[i%len(chains)], c.prefills, &c.lens)
			i++
		}
		if c.lens[0] < 0 {
			b.Fatal("unreachable")
		}
	})
	b.Run("roaring", func(b *testing.B) {
		intern := map[block.Key]uint32{}
		sets := make([]*roaring.Bitmap, 8)
		for i := range sets {
			sets[i] = roaring.New()
		}
		for ci, chain := range chains {
			for _, k := range chain {
				if _, ok := intern[k]; !ok {
					intern[k] = uint32(len(intern))
				}
			}
			for i := range 8 {
				for _, k := range chain[:held[ci][i]] {
					sets[i].Add(intern[k])
				}
			}
		}
		for _, s := range sets {
			s.RunOptimize()
		}
		ids := make([]uint32, 512)
		var lens [8]int
		var i int
		for b.Loop() {
			chain := chains[i%len(chains)]
			n := len(chain)
			for j, k := range chain {
				id, ok := intern[k]
				if !ok {
					n = j
					break
				}
				ids[j] = id
			}
			for s, set := range sets {
				l := 0
				for l < n && set.Contains(ids[l]) {
					l++
				}
				lens[s] = l
			}
			i++
		}
		if lens[0] < 0 {
			b.Fatal("unreachable")
		}
	})
}
