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

func TestLayerKeys(t *testing.T) {
	a, _ := Preset("llama-3-8b", 256)
	b, _ := Preset("llama-3-8b", 512)
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
	for l := range a.Layers {
		add(a.LayerKey(chain, l), "a layer")
		add(b.LayerKey(chain, l), "b layer")
	}
	again := a
	if a.LayerKey(chain, 3) != again.LayerKey(chain, 3) {
		t.Error("layer keys are not deterministic")
	}
	if bytes.Equal(a.commitRecord(), b.commitRecord()) || len(a.commitRecord()) != commitSize {
		t.Error("commit records must name the layout and have their fixed size")
	}
}
