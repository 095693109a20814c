package hbmsim

import (
	"context"
	"errors"
	"fmt"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/rdma"
)

// ErrRange reports a copy outside a page or a page that is not allocated.
var ErrRange = errors.New("hbmsim: range outside an allocated page")

// Options size the simulated device.
type Options struct {
	// PageBytes is the size of one page. Required.
	PageBytes int
	// Pages is how many pages the device holds. Required.
	Pages int
	// Name shows in reports. Default "hbmsim".
	Name string
}

// Device is simulated HBM in host memory. It is safe for concurrent use.
type Device struct {
	opts  Options
	sm    *rdma.SharedMemory
	mem   []byte
	pages *adapter.PageSet
}

var (
	_ adapter.Device       = (*Device)(nil)
	_ adapter.HostMapped   = (*Device)(nil)
	_ adapter.BatchCopier  = (*Device)(nil)
	_ adapter.RegionMapped = (*Device)(nil)
)

// maxBytes bounds the simulated device: the machine's memory is the real
// limit, this catches a unit mistake before it asks for terabytes.
const maxBytes = 1 << 40

// New allocates the device's memory.
func New(opts Options) (*Device, error) {
	if opts.Name == "" {
		opts.Name = "hbmsim"
	}
	if opts.PageBytes <= 0 || opts.Pages <= 0 || int64(opts.PageBytes)*int64(opts.Pages) > maxBytes {
		return nil, fmt.Errorf("%w: hbmsim: %d pages of %d bytes", adapter.ErrInvalid, opts.Pages, opts.PageBytes)
	}
	sm, err := rdma.NewSharedMemory(opts.Name, opts.PageBytes*opts.Pages)
	if err != nil {
		return nil, fmt.Errorf("hbmsim: %w", err)
	}
	return &Device{opts: opts, sm: sm, mem: sm.Bytes(), pages: adapter.NewPageSet(opts.Pages)}, nil
}

// Close releases the memory. Unregister it from any engine first.
func (d *Device) Close() error { return d.sm.Close() }

// Name implements adapter.Device.
func (d *Device) Name() string { return d.opts.Name }

// PageBytes implements adapter.Device.
func (d *Device) PageBytes() int { return d.opts.PageBytes }

// Pages implements adapter.Device.
func (d *Device) Pages() int { return d.opts.Pages }

// FreePages is how many pages are not allocated.
func (d *Device) FreePages() int { return d.pages.Available() }

// Alloc implements adapter.Device.
func (d *Device) Alloc(n int) ([]adapter.Page, error) { return d.pages.Alloc(n) }

// Free implements adapter.Device. Freeing a page twice is a bug.
func (d *Device) Free(pages ...adapter.Page) { d.pages.Free("hbmsim", pages...) }

func (d *Device) span(p adapter.Page, off, n int) ([]byte, error) {
	if p < 0 || int(p) >= d.opts.Pages || off < 0 || n < 0 || off > d.opts.PageBytes || n > d.opts.PageBytes-off {
		return nil, fmt.Errorf("%w: page %d [%d, +%d) of %d", ErrRange, p, off, n, d.opts.PageBytes)
	}
	if !d.pages.Allocated(p) {
		return nil, fmt.Errorf("%w: page %d is free", ErrRange, p)
	}
	base := int(p) * d.opts.PageBytes
	return d.mem[base+off : base+off+n : base+off+n], nil
}

// CopyIn implements adapter.Device.
func (d *Device) CopyIn(_ context.Context, p adapter.Page, off int, src []byte) error {
	dst, err := d.span(p, off, len(src))
	if err != nil {
		return err
	}
	copy(dst, src)
	return nil
}

// CopyInBatch implements adapter.BatchCopier. Every span is checked before
// any is copied, so a bad batch changes nothing.
func (d *Device) CopyInBatch(ctx context.Context, spans []adapter.Span) error {
	dsts := make([][]byte, len(spans))
	for i, s := range spans {
		dst, err := d.span(s.Page, s.Off, len(s.Src))
		if err != nil {
			return err
		}
		dsts[i] = dst
	}
	for i, s := range spans {
		copy(dsts[i], s.Src)
	}
	return ctx.Err()
}

// CopyOut implements adapter.Device.
func (d *Device) CopyOut(_ context.Context, dst []byte, p adapter.Page, off int) error {
	src, err := d.span(p, off, len(dst))
	if err != nil {
		return err
	}
	copy(dst, src)
	return nil
}

// Register implements adapter.Device: the memfd is registered as shared
// memory, so a same-host peer maps it.
func (d *Device) Register(e *rdma.Engine, name string) (*rdma.Segment, error) {
	return e.RegisterShared(name, "hbm:0", d.sm)
}

// Offset implements adapter.Device.
func (d *Device) Offset(p adapter.Page) uint64 { return uint64(p) * uint64(d.opts.PageBytes) }

// PageMemory implements adapter.HostMapped.
func (d *Device) PageMemory(p adapter.Page) []byte {
	base := int(p) * d.opts.PageBytes
	return d.mem[base : base+d.opts.PageBytes : base+d.opts.PageBytes]
}

// HostRegion implements adapter.RegionMapped: the device memory is one
// sealed memfd, which the node on this host maps to write loads into pages.
func (d *Device) HostRegion() client.Region { return d.sm }
