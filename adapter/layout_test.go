package adapter

import (
	"bytes"
	"errors"
	"testing"

	"github.com/yuebing/yuebing/block"
)

func TestPresets(t *testing.T) {
	f := func(name string, tokenBytes int64) {
		t.Helper()
		l, err := Preset(name, 256)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.TokenBytes(); got != tokenBytes {
			t.Errorf("%s: %d bytes per token, want %d", name, got, tokenBytes)
		}
		if got, want := l.BlockBytes(), tokenBytes*256; got != want {
			t.Errorf("%s: %d bytes per block, want %d", name, got, want)
		}
		if l.LayerBytes()*int64(l.Layers) != l.BlockBytes() {
			t.Errorf("%s: layers do not add up to the block", name)
		}
	}
	f("llama-3-8b", 128<<10)  // 2 * 8 heads * 128 * 2 bytes * 32 layers
	f("llama-3-70b", 320<<10) // ... * 80 layers
	f("qwen2-7b", 56<<10)     // 2 * 4 * 128 * 2 * 28
	f("sim-70b", 1280)        // 2 * 1 * 8 * 1 * 80
	if _, err := Preset("gpt-5", 256); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown preset: %v", err)
	}
	if _, err := Preset("llama-3-8b", 7); !errors.Is(err, ErrInvalid) {
		t.Errorf("block size 7: %v", err)
	}
}

func TestLayoutValidate(t *testing.T) {
	err := Layout{Layers: 0, KVHeads: -1, HeadDim: 128, DTypeBytes: 2, BlockTokens: 256}.Validate()
	if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte("Layers")) || !bytes.Contains([]byte(err.Error()), []byte("KVHeads")) {
		t.Errorf("want both problems reported, got %v", err)
	}
	huge := Layout{Layers: 1, KVHeads: 1024, HeadDim: 4096, DTypeBytes: 8, BlockTokens: 1024}
	if err := huge.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a 64 GiB layer validated: %v", err)
	}
}

func TestGroups(t *testing.T) {
	sim, _ := Preset("sim-70b", 512)
	l8b, _ := Preset("llama-3-8b", 256)
	small := Layout{Layers: 8, KVHeads: 2, HeadDim: 8, DTypeBytes: 2, BlockTokens: 16} // 1 KiB layers
	for _, tc := range []struct {
		name   string
		l      Layout
		per    int
		groups int
	}{
		{"sim-70b: 8 KiB layers, about 256 KiB a group, spread evenly", sim, 27, 3},
		{"llama-3-8b: 1 MiB layers, one a group", l8b, 1, 32},
		{"small layers: the whole block", small, 8, 1},
		{"set: 3 layers a group, the last holds 2", func() Layout { s := small; s.GroupLayers = 3; return s }(), 3, 3},
		{"set above the layers", func() Layout { s := small; s.GroupLayers = 8; return s }(), 8, 1},
	} {
		if got := tc.l.LayersPerGroup(); got != tc.per {
			t.Errorf("%s: %d layers a group, want %d", tc.name, got, tc.per)
		}
		if got := tc.l.Groups(); got != tc.groups {
			t.Errorf("%s: %d groups, want %d", tc.name, got, tc.groups)
		}
		// Every layer is in exactly one group, in order, and the groups
		// add up to the block.
		next, total := 0, int64(0)
		for g := range tc.l.Groups() {
			first, end := tc.l.GroupRange(g)
			if first != next || end <= first {
				t.Fatalf("%s: group %d is layers [%d, %d), want from %d", tc.name, g, first, end, next)
			}
			for layer := first; layer < end; layer++ {
				if tc.l.GroupOf(layer) != g {
					t.Fatalf("%s: layer %d in group %d, want %d", tc.name, layer, tc.l.GroupOf(layer), g)
				}
			}
			next = end
			total += tc.l.GroupBytes(g)
		}
		if next != tc.l.Layers || total != tc.l.BlockBytes() {
			t.Errorf("%s: groups cover %d layers, %d bytes; want %d, %d", tc.name, next, total, tc.l.Layers, tc.l.BlockBytes())
		}
	}
	if err := (Layout{Layers: 4, KVHeads: 1, HeadDim: 8, DTypeBytes: 1, BlockTokens: 16, GroupLayers: 5}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("5 layers a group of 4 validated: %v", err)
	}
}

func TestGroupKeys(t *testing.T) {
	a, _ := Preset("llama-3-8b", 256)
	b, _ := Preset("llama-3-8b", 512)
	g4 := a
	g4.GroupLayers = 4
	var chain block.Key
	chain[0] = 1
	seen := map[block.Key]string{chain: "chain"}
	add := func(k block.Key, what string) {
		t.Helper()
		if prev, ok := seen[k]; ok {
			t.Fatalf("%s has the key of %s", what, prev)
		}
		seen[k] = what
	}
	for g := range a.Groups() {
		add(a.GroupKey(chain, g), "a group")
		add(b.GroupKey(chain, g), "b group")
	}
	// Another grouping of the same shape never shares a key.
	for g := range g4.Groups() {
		add(g4.GroupKey(chain, g), "a grouped by 4")
	}
	again := a
	if a.GroupKey(chain, 3) != again.GroupKey(chain, 3) {
		t.Error("group keys are not deterministic")
	}
	if k, off := g4.LayerAt(chain, 6); k != g4.GroupKey(chain, 1) || off != 2*g4.LayerBytes() {
		t.Errorf("layer 6 grouped by 4: %v at %d", k, off)
	}
	for _, x := range []Layout{b, g4} {
		if bytes.Equal(a.commitRecord(), x.commitRecord()) || len(x.commitRecord()) != commitSize {
			t.Error("commit records must name the layout and its grouping, and have their fixed size")
		}
	}
}
