package adapter

import (
	"context"

	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/rdma"
)

// Page names one fixed-size page of device memory.
type Page int32

// Device is the memory of an accelerator as the HBM tier needs it: the
// engine's paged KV pool lives in its pages. Implementations: adapter/hbmsim
// (host memory, a simulator) and, behind the "cuda" build tag on a machine
// with a GPU, one over the CUDA driver API (cuMemAlloc for the pool,
// cuMemcpyHtoDAsync/DtoHAsync on a stream, and GPUDirect registration with
// the transfer service). Implementations are safe for concurrent use;
// copies into one page from two goroutines race as they would on a GPU.
type Device interface {
	// Name is a short name for reports ("hbmsim", "cuda:0").
	Name() string
	// PageBytes is the size of one page.
	PageBytes() int
	// Pages is the number of pages the device holds in all.
	Pages() int
	// Alloc reserves n pages, or fails with ErrDeviceFull and reserves
	// none.
	Alloc(n int) ([]Page, error)
	// Free returns pages to the device.
	Free(pages ...Page)
	// CopyIn copies src (host memory) to page p at offset off.
	CopyIn(ctx context.Context, p Page, off int, src []byte) error
	// CopyOut copies len(dst) bytes of page p at offset off to dst.
	CopyOut(ctx context.Context, dst []byte, p Page, off int) error
	// Register makes the whole device memory a transfer segment of e
	// called name, so peers move bytes to and from pages without a host
	// bounce; a page starts at Offset(p) in it.
	Register(e *rdma.Engine, name string) (*rdma.Segment, error)
	// Offset is where page p starts in the registered segment.
	Offset(p Page) uint64
}

// HostMapped is the optional capability of a Device whose pages the host
// can address directly (the simulator; unified or GPUDirect-mapped memory
// on real hardware). Load writes straight into such pages; other devices
// load into a pinned staging Target and CopyIn per layer.
type HostMapped interface {
	// PageMemory returns page p's memory; valid until the page is freed.
	PageMemory(p Page) []byte
}

// RegionMapped is the optional capability of a HostMapped Device whose
// whole memory is one region the node on this host can map (a sealed
// memfd: hbmsim's), page p starting at Offset(p) in it. PageTarget then
// has the node write loads straight into the pages.
type RegionMapped interface {
	HostMapped
	HostRegion() client.Region
}
