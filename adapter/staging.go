package adapter

import (
	"context"
	"fmt"

	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/rdma"
)

// Staging is a Target in host memory for devices the host cannot address
// (a GPU's HBM without GPUDirect): a Load lands in it, and Upload copies each
// layer to the device's pages as soon as it has landed, so the engine still
// starts layer l while later layers are on the wire. Memory is group-major
// (every block's group 0, then group 1, ...) and, within a group, block by
// block: a group of layers of one block is one range, so the node writes it
// at once into a Staging from NewRegionStaging, and Upload copies one range
// per block and layer from pinned memory, as a real engine does.
type Staging struct {
	layout Layout
	blocks int
	mem    []byte
	// region is the memfd mem is, with NewRegionStaging; nil otherwise.
	region *rdma.SharedMemory
}

// NewStaging lays out blocks blocks of layout over mem, which must hold
// blocks x BlockBytes bytes (pinned memory on a GPU, so host-to-device
// copies run at the bus's speed).
func NewStaging(layout Layout, blocks int, mem []byte) (*Staging, error) {
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	need := int64(blocks) * layout.BlockBytes()
	if blocks < 0 || int64(len(mem)) < need {
		return nil, fmt.Errorf("%w: staging for %d blocks needs %d bytes, have %d", ErrInvalid, blocks, need, len(mem))
	}
	return &Staging{layout: layout, blocks: blocks, mem: mem[:need:need]}, nil
}

// NewRegionStaging is NewStaging over memory of its own that the node on
// this host can map: a Load through shared memory has the node write the
// blocks straight into it (RegisteredTarget), with no staging segment and
// no copy on the engine's side before Upload. Close releases it.
func NewRegionStaging(layout Layout, blocks int) (*Staging, error) {
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	need := int64(blocks) * layout.BlockBytes()
	if blocks <= 0 || int64(int(need)) != need {
		return nil, fmt.Errorf("%w: staging for %d blocks", ErrInvalid, blocks)
	}
	sm, err := rdma.NewSharedMemory("yuebing-kv-staging", int(need))
	if err != nil {
		return nil, fmt.Errorf("adapter: staging memory: %w", err)
	}
	s, err := NewStaging(layout, blocks, sm.Bytes())
	if err != nil {
		sm.Close()
		return nil, err
	}
	s.region = sm
	return s, nil
}

// Close releases the memory of a Staging from NewRegionStaging, which the
// node must no longer be writing (no Load into it in flight); a no-op for
// one from NewStaging.
func (s *Staging) Close() error {
	if s.region == nil {
		return nil
	}
	err := s.region.Close()
	s.region, s.mem = nil, nil
	return err
}

// Bytes is the whole staging memory, for a device that page-locks it
// (hbmcuda's HostRegister) so that uploads from it run at the bus's speed.
func (s *Staging) Bytes() []byte { return s.mem }

// offset is where layer layer of block blk starts in mem.
func (s *Staging) offset(blk, layer int) int64 {
	lb := s.layout.LayerBytes()
	first, end := s.layout.GroupRange(s.layout.GroupOf(layer))
	return int64(first)*lb*int64(s.blocks) + int64(blk)*int64(end-first)*lb + int64(layer-first)*lb
}

// Region implements Target.
func (s *Staging) Region(blk, layer int) []byte {
	off, n := s.offset(blk, layer), s.layout.LayerBytes()
	return s.mem[off : off+n : off+n]
}

// RegionOf implements RegisteredTarget: the memory of a Staging from
// NewRegionStaging is one region; any other's is none.
func (s *Staging) RegionOf(blk, layer int) (client.Region, int64, bool) {
	if s.region == nil {
		return nil, 0, false
	}
	return s.region, s.offset(blk, layer), true
}

var _ RegisteredTarget = (*Staging)(nil)

// PageTarget is the Target of a paged KV pool on a HostMapped device: the
// plan's block i lives in Pages[i], layer l at l x LayerBytes in it. On a
// RegionMapped device (hbmsim) it is a RegisteredTarget: loads through
// shared memory land in the pages with no staging copy.
type PageTarget struct {
	Dev    Device
	Pages  []Page
	Layout Layout
}

// Region implements Target; Dev must be HostMapped.
func (t PageTarget) Region(blk, layer int) []byte {
	hm, ok := t.Dev.(HostMapped)
	if !ok {
		panic(fmt.Sprintf("BUG: adapter: PageTarget on %s, which is not host-mapped", t.Dev.Name()))
	}
	lb := int(t.Layout.LayerBytes())
	return hm.PageMemory(t.Pages[blk])[layer*lb : (layer+1)*lb : (layer+1)*lb]
}

// RegionOf implements RegisteredTarget.
func (t PageTarget) RegionOf(blk, layer int) (client.Region, int64, bool) {
	rm, ok := t.Dev.(RegionMapped)
	if !ok {
		return nil, 0, false
	}
	return rm.HostRegion(), int64(t.Dev.Offset(t.Pages[blk])) + int64(layer)*t.Layout.LayerBytes(), true
}

var _ RegisteredTarget = PageTarget{}

// Upload waits until layer l of ld has landed in s, then copies that layer of
// its valid blocks into pages (the plan's block i goes to pages[i], at the
// layer's offset in the page) and returns how many blocks it copied. A Load
// cut short uploads the blocks that are good and returns the Load's error
// with them: the engine recomputes the rest, never reads a partial block.
func (s *Staging) Upload(ctx context.Context, ld *Load, l int, dev Device, pages []Page) (int, error) {
	n, lerr := ld.Wait(ctx, l)
	if n > len(pages) || n > s.blocks {
		return 0, fmt.Errorf("%w: %d blocks landed, %d pages, staging for %d", ErrInvalid, n, len(pages), s.blocks)
	}
	off := l * int(s.layout.LayerBytes())
	if bc, ok := dev.(BatchCopier); ok && n > 0 {
		spans := make([]Span, n)
		for b := range n {
			spans[b] = Span{Page: pages[b], Off: off, Src: s.Region(b, l)}
		}
		if err := bc.CopyInBatch(ctx, spans); err != nil {
			return 0, fmt.Errorf("adapter: upload of layer %d to %s: %w", l, dev.Name(), err)
		}
		return n, lerr
	}
	for b := range n {
		if err := dev.CopyIn(ctx, pages[b], off, s.Region(b, l)); err != nil {
			return b, fmt.Errorf("adapter: upload of block %d layer %d to %s: %w", b, l, dev.Name(), err)
		}
	}
	return n, lerr
}

// Span is one host-to-device copy of a batch: Src to page Page at Off.
type Span struct {
	Page Page
	Off  int
	Src  []byte
}

// BatchCopier is the optional capability of a Device that queues many
// copies and waits for them once (a GPU stream): a synchronous copy per
// block and layer costs a round trip to the device each, which at 64 KiB a
// layer is most of the time. Upload uses it for a layer's blocks.
type BatchCopier interface {
	// CopyInBatch copies every span and returns when all have landed; on
	// error, which landed is unknown.
	CopyInBatch(ctx context.Context, spans []Span) error
}

// PageSource is a Source reading a Save's layers out of device pages: the
// plan's block i lives in Pages[i], layer l at l x LayerBytes in it.
type PageSource struct {
	Dev    Device
	Pages  []Page
	Layout Layout
}

// CopyLayer implements Source.
func (p PageSource) CopyLayer(blk, layer int, dst []byte) error {
	if blk < 0 || blk >= len(p.Pages) {
		return fmt.Errorf("%w: block %d of %d pages", ErrInvalid, blk, len(p.Pages))
	}
	return p.Dev.CopyOut(context.Background(), dst, p.Pages[blk], layer*int(p.Layout.LayerBytes()))
}
