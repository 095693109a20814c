package kvevents

import (
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

func TestMapper(t *testing.T) {
	ts := seq(3 * 16)
	keys, err := block.ChainKeys("t/m", 16, ts)
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	m, err := NewMapper("t/m", 16, 4, &st)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(evs ...Event) Update {
		t.Helper()
		var u Update
		m.Apply(Batch{Events: evs}, &u)
		return u
	}
	want := func(u Update, reset bool, changes ...Change) {
		t.Helper()
		if u.Reset != reset || len(u.Changes) != len(changes) {
			t.Fatalf("got %+v, want reset %v and %v", u, reset, changes)
		}
		for i := range changes {
			if u.Changes[i] != changes[i] {
				t.Fatalf("change %d: got %+v, want %+v", i, u.Changes[i], changes[i])
			}
		}
	}
	hbm, dram := index.TierMask(0).With(TierHBM), index.TierMask(0).With(TierDRAM)
	h := []Hash{HashInt(1), HashInt(2), HashInt(3)}

	// Two blocks on the GPU, the third chained by its parent's hash.
	want(apply(Event{Kind: BlockStored, Hashes: h[:2], Tokens: ts[:32], BlockSize: 16, Medium: "GPU"}),
		false, Change{keys[0], hbm}, Change{keys[1], hbm})
	want(apply(Event{Kind: BlockStored, Hashes: h[2:], Parent: h[1], Tokens: ts[32:], BlockSize: 16}),
		false, Change{keys[2], hbm})
	// Offloaded to CPU, then dropped from the GPU: still held, in DRAM.
	want(apply(Event{Kind: BlockStored, Hashes: h[2:], Parent: h[1], Tokens: ts[32:], BlockSize: 16, Medium: "CPU"}),
		false, Change{keys[2], hbm | dram})
	want(apply(Event{Kind: BlockRemoved, Hashes: h[2:], Medium: "GPU"}), false, Change{keys[2], dram})
	want(apply(Event{Kind: BlockRemoved, Hashes: h[2:], Medium: "CPU"}), false, Change{keys[2], 0})
	// Removed blocks still key their children.
	want(apply(Event{Kind: BlockStored, Hashes: []Hash{HashInt(9)}, Parent: h[2], Tokens: ts[:16], BlockSize: 16}),
		false, Change{mustNext(t, keys[2], ts[:16]), hbm})
	// Blocks that cannot be keyed are counted, not guessed.
	want(apply(
		Event{Kind: BlockStored, Hashes: []Hash{HashInt(20)}, Parent: HashInt(404), Tokens: ts[:16], BlockSize: 16},
		Event{Kind: BlockStored, Hashes: []Hash{HashInt(21)}, Tokens: ts[:8], BlockSize: 8},
		Event{Kind: BlockStored, Hashes: []Hash{HashInt(22)}, Tokens: ts[:16], BlockSize: 16, LoRA: true},
		Event{Kind: BlockRemoved, Hashes: []Hash{HashInt(23)}},
	), false)
	if st.Orphans.Load() != 1 || st.Unkeyable.Load() != 2 || st.UnknownRemoved.Load() != 1 {
		t.Fatalf("orphans %d unkeyable %d unknown removed %d, want 1 2 1", st.Orphans.Load(), st.Unkeyable.Load(), st.UnknownRemoved.Load())
	}
	// Past MaxBlocks, removed hashes go first; live ones past it reset.
	want(apply(Event{Kind: BlockStored, Hashes: []Hash{HashInt(30)}, Tokens: ts[16:32], BlockSize: 16}),
		false, Change{mustNext(t, block.Root("t/m", 16), ts[16:32]), hbm})
	if m.Len() != 4 {
		t.Fatalf("mapper holds %d hashes, want 4 after trimming", m.Len())
	}
	want(apply(Event{Kind: BlockStored, Hashes: []Hash{HashInt(31)}, Tokens: ts[32:], BlockSize: 16}), true)
	if st.Overflows.Load() != 1 || m.Len() != 0 {
		t.Fatalf("overflows %d len %d, want 1 and 0", st.Overflows.Load(), m.Len())
	}
	// AllBlocksCleared resets, and what follows it in the batch applies.
	want(apply(
		Event{Kind: BlockStored, Hashes: h[:1], Tokens: ts[:16], BlockSize: 16},
		Event{Kind: AllBlocksCleared},
		Event{Kind: BlockStored, Hashes: h[1:2], Tokens: ts[:16], BlockSize: 16},
	), true, Change{keys[0], hbm})
}

// TestMapperGroups: a hybrid model reports each KV cache group's blocks
// under the same hashes, and the groups evict apart; the prefix stays
// held while any group holds it. Its decoded events come with each
// group's hashes (Hash.InGroup).
func TestMapperGroups(t *testing.T) {
	ts := seq(2 * 16)
	keys, err := block.ChainKeys("t/m", 16, ts)
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	m, err := NewMapper("t/m", 16, 64, &st)
	if err != nil {
		t.Fatal(err)
	}
	hbm := index.TierMask(0).With(TierHBM)
	apply := func(evs ...Event) []Change {
		var u Update
		m.Apply(Batch{Events: evs}, &u)
		return u.Changes
	}
	in := func(g int, hs ...Hash) []Hash {
		out := make([]Hash, len(hs))
		for i, h := range hs {
			out[i] = h.InGroup(g)
		}
		return out
	}
	h := []Hash{HashInt(1), HashInt(2)}
	got := apply(
		Event{Kind: BlockStored, Hashes: in(0, h...), Tokens: ts, BlockSize: 16},
		Event{Kind: BlockStored, Hashes: in(1, h...), Tokens: ts, BlockSize: 16, Group: 1},
	)
	if len(got) != 2 || got[0] != (Change{keys[0], hbm}) || got[1] != (Change{keys[1], hbm}) {
		t.Fatalf("stored in two groups: %+v", got)
	}
	// The sliding-window group drops both; the full-attention group still
	// holds them, so nothing changes.
	if got := apply(Event{Kind: BlockRemoved, Hashes: in(1, h...), Group: 1}); len(got) != 0 {
		t.Fatalf("one group's removal changed %+v", got)
	}
	if got := apply(Event{Kind: BlockRemoved, Hashes: in(0, h[1])}); len(got) != 1 || got[0] != (Change{keys[1], 0}) {
		t.Fatalf("the last group's removal: %+v", got)
	}
	// An unkeyable event stores nothing; its removal is an unknown one.
	if got := apply(Event{Kind: BlockStored, Hashes: []Hash{HashInt(7)}, Tokens: ts, BlockSize: 16, Unkeyable: true},
		Event{Kind: BlockRemoved, Hashes: []Hash{HashInt(7)}, Medium: "CPU_PINNED"}); len(got) != 0 {
		t.Fatalf("unkeyable: %+v", got)
	}
	if st.Unkeyable.Load() != 1 || st.UnknownRemoved.Load() != 1 {
		t.Fatalf("unkeyable %d unknown removed %d, want 1 and 1", st.Unkeyable.Load(), st.UnknownRemoved.Load())
	}
}

func mustNext(t *testing.T, prev block.Key, ts []uint32) block.Key {
	t.Helper()
	c, err := block.NewChain("t/m", 16)
	if err != nil {
		t.Fatal(err)
	}
	c.Resume(prev)
	return c.Next(ts)
}

// TestMapperAdoptsBlockSize: the engine's events, not configuration, say
// what its blocks are: a Mapper configured with 16 keys an engine of 32
// with 32 from its first event on, counts the disagreement, and drops
// what it keyed at the old size.
func TestMapperAdoptsBlockSize(t *testing.T) {
	ts := seq(4 * 32)
	var st Stats
	m, err := NewMapper("t/m", 16, 1<<10, &st)
	if err != nil {
		t.Fatal(err)
	}
	var u Update
	m.Apply(Batch{Events: []Event{{Kind: BlockStored, Hashes: []Hash{HashInt(1)}, Tokens: ts[:16], BlockSize: 16}}}, &u)
	if u.BlockSize != 16 || len(u.Changes) != 1 {
		t.Fatalf("got %+v, want one block keyed at 16", u)
	}
	u = Update{}
	m.Apply(Batch{Events: []Event{
		{Kind: BlockStored, Hashes: []Hash{HashInt(2), HashInt(3)}, Tokens: ts[:64], BlockSize: 32},
		{Kind: BlockStored, Hashes: []Hash{HashInt(4)}, Parent: HashInt(3), Tokens: ts[64:96], BlockSize: 32},
	}}, &u)
	keys, _ := block.ChainKeys("t/m", 32, ts[:96])
	hbm := index.TierMask(0).With(TierHBM)
	if !u.Reset || u.BlockSize != 32 || len(u.Changes) != 3 || u.Changes[0] != (Change{keys[0], hbm}) || u.Changes[2] != (Change{keys[2], hbm}) {
		t.Fatalf("got %+v, want a reset and three blocks keyed at 32", u)
	}
	if m.BlockSize() != 32 || st.OtherBlockSize.Load() != 2 || st.BlockSizeChanges.Load() != 1 || st.Unkeyable.Load() != 0 {
		t.Fatalf("block size %d, other %d, changes %d, unkeyable %d; want 32 2 1 0", m.BlockSize(), st.OtherBlockSize.Load(), st.BlockSizeChanges.Load(), st.Unkeyable.Load())
	}
}
