package kvevents

import (
	"math/rand/v2"
	"testing"

	"github.com/yuebing/yuebing/block"
)

// BenchmarkDecodeAndMap measures what a subscriber spends on one batch
// once it has the message: decoding it and keying its blocks. The batch is
// a busy engine's step: a chain of 8 blocks of 16 tokens stored (32-byte
// hashes, as vLLM's sha256 hashing sends) and the 8 blocks of the chain
// stored 64 batches before removed.
func BenchmarkDecodeAndMap(b *testing.B) {
	const chains, live = 256, 64
	rng := rand.New(rand.NewPCG(1, 2))
	payloads := make([][]byte, chains)
	stored := make([][]Hash, chains)
	for c := range chains {
		ts := make([]uint32, 8*16)
		for j := range ts {
			ts[j] = rng.Uint32N(150000) // a vocabulary's ids
		}
		keys, _ := block.ChainKeys("t/m", 16, ts)
		for _, k := range keys {
			stored[c] = append(stored[c], HashBytes(k[:]))
		}
		evs := []Event{{Kind: BlockStored, Hashes: stored[c], Tokens: ts, BlockSize: 16}}
		if c >= live {
			evs = append(evs, Event{Kind: BlockRemoved, Hashes: stored[c-live]})
		}
		p, err := AppendBatch(nil, Batch{TS: 1, Events: evs})
		if err != nil {
			b.Fatal(err)
		}
		payloads[c] = p
	}
	m, err := NewMapper("t/m", 16, 1<<20, nil)
	if err != nil {
		b.Fatal(err)
	}
	var u Update
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := payloads[i%chains]
		i++
		if i%chains == 0 {
			m.Reset() // the chains come round again: start from a clean cache
		}
		bt, err := DecodeBatch(p, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		u.Changes = u.Changes[:0]
		m.Apply(bt, &u)
	}
}
