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
// contiguous region of LayerBytes (keys then values of the block's tokens),
// and a block is stored as groups of consecutive layers, one sub-object per
// group (GroupLayers): a layer is read alone with a ranged read of its
// group (LayerAt).
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
	// GroupLayers is how many consecutive layers of a block one stored
	// sub-object holds: the unit Load moves and signals, and Save stores.
	// Default 0: the fewest layers making a group of MinGroupBytes, spread
	// evenly over the block (sim-70b: 3 groups of 27, 27 and 26 layers of
	// 8 KiB; a layout whose layers are MinGroupBytes or more: one layer a
	// group).
	GroupLayers int
}

// MinGroupBytes is the smallest sub-object the default grouping makes: below
// it the node's fixed cost per key, not the bytes, sets the speed of a load
// (docs/adapter.md).
const MinGroupBytes = 256 << 10

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

// maxLayerBytes bounds one group of layers of one block: the server's
// default largest block is 256 MiB, and a group is stored as one.
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
	bad("GroupLayers", l.GroupLayers, 0, max(l.Layers, 1))
	if err := block.ValidateBlockSize(l.BlockTokens); err != nil {
		errs = append(errs, fmt.Errorf("%w: layout BlockTokens: %w", ErrInvalid, err))
	}
	if len(errs) == 0 && l.GroupBytes(0) > maxLayerBytes {
		errs = append(errs, fmt.Errorf("%w: one group of layers of a block is %d bytes, over %d", ErrInvalid, l.GroupBytes(0), maxLayerBytes))
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

// LayersPerGroup is the layers of every group but perhaps the last (which
// holds the rest): GroupLayers, or the default it stands for.
func (l Layout) LayersPerGroup() int {
	if l.GroupLayers > 0 {
		return min(l.GroupLayers, l.Layers)
	}
	lb := l.LayerBytes()
	if lb <= 0 || l.Layers <= 1 {
		return 1
	}
	g := int(min(int64(l.Layers), (MinGroupBytes+lb-1)/lb))
	// As many groups as that makes, with the layers spread evenly over
	// them: 80 layers of 8 KiB make 3 groups of 27, not 32, 32 and 16.
	n := (l.Layers + g - 1) / g
	return (l.Layers + n - 1) / n
}

// Groups is the number of layer groups a block is stored and loaded in.
func (l Layout) Groups() int {
	g := l.LayersPerGroup()
	return (l.Layers + g - 1) / g
}

// GroupOf returns the group holding layer layer.
func (l Layout) GroupOf(layer int) int { return layer / l.LayersPerGroup() }

// GroupRange returns the layers [first, end) of group g.
func (l Layout) GroupRange(g int) (first, end int) {
	n := l.LayersPerGroup()
	return g * n, min((g+1)*n, l.Layers)
}

// GroupBytes is group g of one block: its layers, one after another.
func (l Layout) GroupBytes(g int) int64 {
	first, end := l.GroupRange(g)
	return int64(end-first) * l.LayerBytes()
}

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
	binary.LittleEndian.PutUint32(b[20:], uint32(l.LayersPerGroup()))
	s := sha256.Sum256(b[:24])
	var f [8]byte
	copy(f[:], s[:8])
	return f
}

// GroupKey is the key of group g of the block whose chained key is chain:
// SHA-256("yuebing/layers/v2" || chain || layout fingerprint || g as
// little-endian uint32). The fingerprint covers the grouping, so blocks
// stored with one grouping are never read as another. It is a key of its
// own, not a link of the chain; the block's chained key holds the commit
// record.
func (l Layout) GroupKey(chain block.Key, g int) block.Key {
	return l.groupKey(l.fingerprint(), chain, g)
}

const groupDomain = "yuebing/layers/v2"

func (l Layout) groupKey(fp [8]byte, chain block.Key, g int) block.Key {
	var b [len(groupDomain) + block.KeySize + 8 + 4]byte
	n := copy(b[:], groupDomain)
	n += copy(b[n:], chain[:])
	n += copy(b[n:], fp[:])
	binary.LittleEndian.PutUint32(b[n:], uint32(g))
	return block.Key(sha256.Sum256(b[:n+4]))
}

// LayerAt says where layer layer of the block chain is stored: the key of
// its group's sub-object and the offset of the layer in it (LayerBytes
// long). One layer is read alone with a ranged GET of that key; the server
// checks the whole sub-object's checksum, not the range's.
func (l Layout) LayerAt(chain block.Key, layer int) (key block.Key, offset int64) {
	g := l.GroupOf(layer)
	first, _ := l.GroupRange(g)
	return l.GroupKey(chain, g), int64(layer-first) * l.LayerBytes()
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
