package adapter

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/yuebing/yuebing/block"
)

// Layout is the KV shape of a model: what one token costs in KV cache and how
// a block of BlockTokens tokens is laid out. Every layer of a block is one
// contiguous region of LayerBytes (keys then values of the block's tokens), so
// one layer of one block can be read or written alone.
type Layout struct {
	// Name identifies the model shape in reports ("llama-3-8b").
	Name string
	// Layers is the number of transformer layers.
	Layers int
	// KVHeads is the number of key/value heads (fewer than query heads
	// under grouped-query attention).
	KVHeads int
	// HeadDim is the size of one head.
	HeadDim int
	// DTypeBytes is the bytes of one element (2 for bf16/fp16, 1 for fp8).
	DTypeBytes int
	// BlockTokens is the tokens per block, the key's block size (16 to
	// 1024).
	BlockTokens int
}

// Presets are real model shapes (grouped-query attention, bf16). Their block
// size is set by the caller (WithBlockTokens).
var Presets = map[string]Layout{
	// Llama-3-8B: 32 layers, 8 KV heads of 128: 128 KiB per token.
	"llama-3-8b": {Name: "llama-3-8b", Layers: 32, KVHeads: 8, HeadDim: 128, DTypeBytes: 2},
	// Llama-3-70B: 80 layers, 8 KV heads of 128: 320 KiB per token.
	"llama-3-70b": {Name: "llama-3-70b", Layers: 80, KVHeads: 8, HeadDim: 128, DTypeBytes: 2},
	// Qwen2-7B: 28 layers, 4 KV heads of 128: 56 KiB per token.
	"qwen2-7b": {Name: "qwen2-7b", Layers: 28, KVHeads: 4, HeadDim: 128, DTypeBytes: 2},
	// sim-70b keeps Llama-3-70B's 80 layers with one 8-wide fp8 head: 1280
	// bytes per token (1/256 of the real shape), so a simulated engine on a
	// small machine moves real bytes layer by layer without memory size and
	// bandwidth becoming the experiment.
	"sim-70b": {Name: "sim-70b", Layers: 80, KVHeads: 1, HeadDim: 8, DTypeBytes: 1},
}

// Preset returns the named preset with the given block size.
func Preset(name string, blockTokens int) (Layout, error) {
	l, ok := Presets[name]
	if !ok {
		names := make([]string, 0, len(Presets))
		for n := range Presets {
			names = append(names, n)
		}
		sort.Strings(names)
		return Layout{}, fmt.Errorf("%w: no layout preset %q (have %v)", ErrInvalid, name, names)
	}
	l.BlockTokens = blockTokens
	return l, l.Validate()
}

// maxLayerBytes bounds one layer of one block: the server's default largest
// block is 256 MiB, and a layer is stored as one.
const maxLayerBytes = 256 << 20

// Validate reports every problem of the layout at once.
func (l Layout) Validate() error {
	var errs []error
	bad := func(field string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%w: layout %s %d not in [%d, %d]", ErrInvalid, field, v, lo, hi))
		}
	}
	bad("Layers", l.Layers, 1, 1024)
	bad("KVHeads", l.KVHeads, 1, 1024)
	bad("HeadDim", l.HeadDim, 1, 4096)
	bad("DTypeBytes", l.DTypeBytes, 1, 8)
	if err := block.ValidateBlockSize(l.BlockTokens); err != nil {
		errs = append(errs, fmt.Errorf("%w: layout BlockTokens: %w", ErrInvalid, err))
	}
	if len(errs) == 0 && l.LayerBytes() > maxLayerBytes {
		errs = append(errs, fmt.Errorf("%w: one layer of a block is %d bytes, over %d", ErrInvalid, l.LayerBytes(), maxLayerBytes))
	}
	return errors.Join(errs...)
}

// TokenLayerBytes is the KV of one token in one layer: keys and values.
func (l Layout) TokenLayerBytes() int64 {
	return 2 * int64(l.KVHeads) * int64(l.HeadDim) * int64(l.DTypeBytes)
}

// TokenBytes is the KV of one token over all layers.
func (l Layout) TokenBytes() int64 { return l.TokenLayerBytes() * int64(l.Layers) }

// LayerBytes is one layer of one block: the unit Load and Save move.
func (l Layout) LayerBytes() int64 { return l.TokenLayerBytes() * int64(l.BlockTokens) }

// Groups is the number of layer groups a block is stored and loaded in.
func (l Layout) Groups() int { return l.Layers }

// GroupOf returns the group holding layer layer.
func (l Layout) GroupOf(layer int) int { return layer }

// BlockBytes is a whole block, all layers.
func (l Layout) BlockBytes() int64 { return l.LayerBytes() * int64(l.Layers) }

// fingerprint names the shape, so blocks saved under one layout are never
// read as another's: the layer keys and the commit record depend on it.
func (l Layout) fingerprint() [8]byte {
	var b [24]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(l.Layers))
	binary.LittleEndian.PutUint32(b[4:], uint32(l.KVHeads))
	binary.LittleEndian.PutUint32(b[8:], uint32(l.HeadDim))
	binary.LittleEndian.PutUint32(b[12:], uint32(l.DTypeBytes))
	binary.LittleEndian.PutUint32(b[16:], uint32(l.BlockTokens))
	s := sha256.Sum256(b[:20])
	var f [8]byte
	copy(f[:], s[:8])
	return f
}

// LayerKey is the key of layer layer of the block whose chained key is
// chain: SHA-256("yuebing/layer/v1" || chain || layout fingerprint ||
// layer as little-endian uint32). It is a key of its own, not a link of the
// chain; the block's chained key holds the commit record.
func (l Layout) LayerKey(chain block.Key, layer int) block.Key {
	fp := l.fingerprint()
	h := sha256.New()
	h.Write([]byte("yuebing/layer/v1"))
	h.Write(chain[:])
	h.Write(fp[:])
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(layer))
	h.Write(b[:])
	var k block.Key
	h.Sum(k[:0])
	return k
}

// commitRecord is the value stored under a block's chained key once all its
// layers are in: magic, layout fingerprint, layers, bytes per layer. Its
// presence is what Lookup counts as a hit.
func (l Layout) commitRecord() []byte {
	b := make([]byte, 0, commitSize)
	b = append(b, commitMagic...)
	fp := l.fingerprint()
	b = append(b, fp[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(l.Layers))
	b = binary.LittleEndian.AppendUint64(b, uint64(l.LayerBytes()))
	return b
}

const (
	commitMagic = "YBKV"
	commitSize  = 4 + 8 + 4 + 8
)
