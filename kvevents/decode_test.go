package kvevents

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func pack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seq(n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}

func TestDecodeBatch(t *testing.T) {
	digest := make([]byte, 32)
	digest[31] = 7
	f := func(name string, v any, want Batch) {
		t.Helper()
		got, err := DecodeBatch(pack(t, v), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.TS != want.TS || got.DPRank != want.DPRank || len(got.Events) != len(want.Events) {
			t.Fatalf("%s: got %+v, want %+v", name, got, want)
		}
		for i := range got.Events {
			g, w := got.Events[i], want.Events[i]
			if g.Kind != w.Kind || !slices.Equal(g.Hashes, w.Hashes) || g.Parent != w.Parent ||
				!slices.Equal(g.Tokens, w.Tokens) || g.BlockSize != w.BlockSize || g.LoRA != w.LoRA ||
				g.Extra != w.Extra || g.Medium != w.Medium || g.Group != w.Group || g.Unkeyable != w.Unkeyable {
				t.Fatalf("%s: event %d: got %+v, want %+v", name, i, g, w)
			}
		}
	}
	f("array layout", []any{1.5, []any{
		[]any{"BlockStored", []any{int64(-3), uint64(math.MaxUint64)}, nil, seq(32), 16, nil, "GPU"},
		[]any{"BlockRemoved", []any{int64(-3)}, "CPU"},
		[]any{"AllBlocksCleared"},
	}, 2}, Batch{TS: 1.5, DPRank: 2, Events: []Event{
		{Kind: BlockStored, Hashes: []Hash{HashInt(math.MaxUint64 - 2), HashInt(math.MaxUint64)}, Tokens: seq(32), BlockSize: 16, Medium: "GPU"},
		{Kind: BlockRemoved, Hashes: []Hash{HashInt(math.MaxUint64 - 2)}, Medium: "CPU"},
		{Kind: AllBlocksCleared},
	}})
	f("array layout without rank, older release without medium", []any{2.0, []any{
		[]any{"BlockStored", []any{digest}, digest, seq(16), 16, 3},
	}}, Batch{TS: 2, DPRank: -1, Events: []Event{
		{Kind: BlockStored, Hashes: []Hash{HashBytes(digest)}, Parent: HashBytes(digest), Tokens: seq(16), BlockSize: 16, LoRA: true},
	}})
	f("array layout with the fields of newer releases", []any{3.0, []any{
		[]any{"BlockStored", []any{1}, 0, seq(16), 16, nil, nil, "adapter", []any{nil}, 0, "full", nil, "LOCAL"},
		[]any{"BlockStored", []any{2}, 1, seq(16), 16, nil, nil, nil, []any{[]any{"mm", 1}}},
		[]any{"BlockRemoved", []any{1}, nil, 0, "LOCAL"},
	}, 0, "future"}, Batch{TS: 3, DPRank: 0, Events: []Event{
		{Kind: BlockStored, Hashes: []Hash{HashInt(1)}, Parent: HashInt(0), Tokens: seq(16), BlockSize: 16, LoRA: true},
		{Kind: BlockStored, Hashes: []Hash{HashInt(2)}, Parent: HashInt(1), Tokens: seq(16), BlockSize: 16, Extra: true},
		{Kind: BlockRemoved, Hashes: []Hash{HashInt(1)}},
	}})
	f("map layout", map[string]any{"ts": 4.0, "data_parallel_rank": nil, "events": []any{
		map[string]any{"type": "BlockStored", "block_hashes": []any{digest}, "parent_block_hash": nil,
			"token_ids": seq(16), "block_size": 16, "lora_id": nil, "medium": "GPU", "lora_name": nil, "group_idx": 1},
		map[string]any{"block_hashes": []any{digest}, "type": "BlockRemoved", "medium": "GPU"},
		map[string]any{"type": "AllBlocksCleared"},
	}}, Batch{TS: 4, DPRank: -1, Events: []Event{
		{Kind: BlockStored, Hashes: []Hash{HashBytes(digest).InGroup(1)}, Tokens: seq(16), BlockSize: 16, Medium: "GPU", Group: 1},
		{Kind: BlockRemoved, Hashes: []Hash{HashBytes(digest)}, Medium: "GPU"},
		{Kind: AllBlocksCleared},
	}})
	// What vLLM sends that cannot be keyed, and kinds of newer releases:
	// the batch still decodes, so the events beside them are not lost.
	f("unkeyable and unknown events", []any{5.0, []any{
		[]any{"BlockMoved", []any{1}, "future"},
		// A hybrid model's stored run with its null blocks left out.
		[]any{"BlockStored", []any{1}, nil, seq(48), 16, nil, "GPU"},
		// The CPU offloading connector's placeholders.
		[]any{"BlockStored", []any{2}, nil, []any{}, 16, nil, "CPU"},
		[]any{"BlockStored", []any{3}, nil, []any{}, 0, nil, "CPU"},
		[]any{"BlockStored", []any{4}, nil},
		// SGLang's token pairs under EAGLE speculative decoding.
		[]any{"BlockStored", []any{6}, nil, []any{[]any{1, 2}, []any{3, 4}}, 2, nil, "GPU"},
		// Group 2's copy of hash 5, and its removal.
		[]any{"BlockStored", []any{5}, 4, seq(16), 16, nil, "GPU", nil, nil, 2},
		[]any{"BlockRemoved", []any{5}, "CPU_PINNED", 2},
	}}, Batch{TS: 5, DPRank: -1, Events: []Event{
		{Kind: BlockStored, Hashes: []Hash{HashInt(1)}, Tokens: seq(48), BlockSize: 16, Medium: "GPU", Unkeyable: true},
		{Kind: BlockStored, Hashes: []Hash{HashInt(2)}, Tokens: []uint32{}, BlockSize: 16, Medium: "CPU", Unkeyable: true},
		{Kind: BlockStored, Hashes: []Hash{HashInt(3)}, Tokens: []uint32{}, Medium: "CPU", Unkeyable: true},
		{Kind: BlockStored, Hashes: []Hash{HashInt(4)}, Unkeyable: true},
		{Kind: BlockStored, Hashes: []Hash{HashInt(6)}, Tokens: []uint32{0, 0}, BlockSize: 2, Medium: "GPU", Unkeyable: true},
		{Kind: BlockStored, Hashes: []Hash{HashInt(5).InGroup(2)}, Parent: HashInt(4).InGroup(2), Tokens: seq(16), BlockSize: 16, Medium: "GPU", Group: 2},
		{Kind: BlockRemoved, Hashes: []Hash{HashInt(5).InGroup(2)}, Medium: "CPU_PINNED", Group: 2},
	}})
	// msgspec writes the tag first; a Go map would not keep that order.
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, err := range []error{enc.EncodeMapLen(2), enc.EncodeString("ts"), enc.EncodeFloat64(6),
		enc.EncodeString("events"), enc.EncodeArrayLen(2),
		enc.EncodeMapLen(2), enc.EncodeString("type"), enc.EncodeString("BlockEvicted"), enc.EncodeString("token_ids"), enc.EncodeString("not a list"),
		enc.EncodeMapLen(1), enc.EncodeString("type"), enc.EncodeString("AllBlocksCleared")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := DecodeBatch(buf.Bytes(), Limits{})
	if err != nil || len(b.Events) != 1 || b.Unknown != 1 {
		t.Fatalf("map layout with an unknown kind: %+v %v", b, err)
	}
	if s := HashInt(5).InGroup(2).String(); s != "g2/5" {
		t.Fatalf("a group's hash prints as %q", s)
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	deep := any([]any{})
	for range 40 {
		deep = []any{deep}
	}
	f := func(name string, payload []byte) {
		t.Helper()
		if _, err := DecodeBatch(payload, Limits{MaxTokens: 64}); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	f("empty", nil)
	f("not msgpack", []byte{0xc1})
	f("a string", pack(t, "batch"))
	f("no events", pack(t, []any{1.0}))
	f("events not a list", pack(t, []any{1.0, 3}))
	f("tag not a string", pack(t, []any{1.0, []any{[]any{7, []any{1}}}}))
	f("negative block size", pack(t, []any{1.0, []any{[]any{"BlockStored", []any{}, nil, []any{}, -1, nil, nil}}}))
	f("stored without hashes", pack(t, map[string]any{"ts": 1.0, "events": []any{map[string]any{"type": "BlockStored", "token_ids": []any{1}}}}))
	f("negative group", pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1}, nil, -2}}}))
	f("negative token", pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{-1}, 1, nil, nil}}}))
	f("past the token limit", pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1, 2, 3, 4, 5}, nil, seq(80), 16, nil, nil}}}))
	f("hash a float", pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1.5}, nil}}}))
	f("hash too long", pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{make([]byte, 65)}, nil}}}))
	f("NaN ts", pack(t, []any{math.NaN(), []any{}}))
	f("trailing bytes", append(pack(t, []any{1.0, []any{}}), 0x90))
	f("nested too deep", pack(t, []any{1.0, []any{}, 0, deep}))
	f("array header past the payload", []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f("map without type", pack(t, map[string]any{"ts": 1.0, "events": []any{map[string]any{"block_hashes": []any{1}}}}))
	f("removed with tokens", pack(t, map[string]any{"ts": 1.0, "events": []any{map[string]any{"type": "BlockRemoved", "block_hashes": []any{1}, "token_ids": []any{1}}}}))
	f("batch map without events", pack(t, map[string]any{"ts": 1.0}))
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(pack(f, []any{1.5, []any{
		[]any{"BlockStored", []any{1, 2}, nil, seq(32), 16, nil, "GPU"},
		[]any{"BlockRemoved", []any{1}, "GPU"},
		[]any{"AllBlocksCleared"},
	}, 0}))
	f.Add(pack(f, map[string]any{"ts": 1.0, "events": []any{map[string]any{"type": "BlockStored",
		"block_hashes": []any{[]byte("0123456789abcdef0123456789abcdef")}, "parent_block_hash": nil,
		"token_ids": seq(16), "block_size": 16, "lora_id": nil, "medium": nil}}}))
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := DecodeBatch(payload, Limits{MaxEvents: 256, MaxHashes: 256, MaxTokens: 4096})
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		for _, e := range b.Events {
			if e.Kind == BlockStored && !e.Unkeyable && len(e.Tokens) != len(e.Hashes)*e.BlockSize {
				t.Fatalf("accepted a stored event of %d tokens for %d blocks of %d", len(e.Tokens), len(e.Hashes), e.BlockSize)
			}
		}
		// What decodes re-encodes to the same events (less the LoRA and
		// extra-key flags, which the encoder does not carry).
		if enc, err := AppendBatch(nil, b); err == nil {
			back, err := DecodeBatch(enc, Limits{MaxEvents: 256, MaxHashes: 256, MaxTokens: 4096})
			if err != nil {
				t.Fatalf("re-encoded batch does not decode: %v", err)
			}
			for i, e := range b.Events {
				g := back.Events[i]
				if g.Kind != e.Kind || !slices.Equal(g.Hashes, e.Hashes) || g.Parent != e.Parent || !slices.Equal(g.Tokens, e.Tokens) || g.BlockSize != e.BlockSize || g.Medium != e.Medium || g.Group != e.Group {
					t.Fatalf("event %d: %+v re-encoded as %+v", i, e, g)
				}
			}
		}
		// A decoded batch must be mappable without panicking.
		m, err := NewMapper("t/m", 16, 64, nil)
		if err != nil {
			t.Fatal(err)
		}
		var u Update
		m.Apply(b, &u)
	})
}
