//go:build cuda && linux && cgo

package hbmcuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned int);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuMemHostAlloc)(void **, size_t, unsigned int);
static CUresult (*p_cuMemFreeHost)(void *);
static CUresult (*p_cuMemHostRegister)(void *, size_t, unsigned int);
static CUresult (*p_cuMemHostUnregister)(void *);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);

// yb_open loads the driver and its entry points; 0 on success, else -1
// with the reason in err.
static int yb_open(char *err, int n) {
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(err, n, "%s", dlerror());
		return -1;
	}
#define SYM(p, name) \
	if (!(*(void **)(&p) = dlsym(lib, name))) { snprintf(err, n, "libcuda.so.1 has no %s", name); return -1; }
	SYM(p_cuInit, "cuInit");
	SYM(p_cuDeviceGetCount, "cuDeviceGetCount");
	SYM(p_cuDeviceGet, "cuDeviceGet");
	SYM(p_cuDeviceGetName, "cuDeviceGetName");
	SYM(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(p_cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	SYM(p_cuCtxSetCurrent, "cuCtxSetCurrent");
	SYM(p_cuMemAlloc, "cuMemAlloc_v2");
	SYM(p_cuMemFree, "cuMemFree_v2");
	SYM(p_cuMemcpyHtoD, "cuMemcpyHtoD_v2");
	SYM(p_cuMemcpyDtoH, "cuMemcpyDtoH_v2");
	SYM(p_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	SYM(p_cuStreamCreate, "cuStreamCreate");
	SYM(p_cuStreamDestroy, "cuStreamDestroy_v2");
	SYM(p_cuStreamSynchronize, "cuStreamSynchronize");
	SYM(p_cuMemHostAlloc, "cuMemHostAlloc");
	SYM(p_cuMemFreeHost, "cuMemFreeHost");
	SYM(p_cuMemHostRegister, "cuMemHostRegister_v2");
	SYM(p_cuMemHostUnregister, "cuMemHostUnregister");
	SYM(p_cuGetErrorName, "cuGetErrorName");
#undef SYM
	return 0;
}

static const char *yb_errname(CUresult r) {
	const char *s = 0;
	if (p_cuGetErrorName(r, &s) != 0 || !s) return "CUDA_ERROR_UNKNOWN";
	return s;
}

static CUresult yb_init(void) { return p_cuInit(0); }
static CUresult yb_count(int *n) { return p_cuDeviceGetCount(n); }

static CUresult yb_retain(int ordinal, CUdevice *dev, CUcontext *ctx, char *name, int n) {
	CUresult r = p_cuDeviceGet(dev, ordinal);
	if (r) return r;
	r = p_cuDeviceGetName(name, n, *dev);
	if (r) return r;
	return p_cuDevicePrimaryCtxRetain(ctx, *dev);
}

static CUresult yb_release(CUdevice dev) { return p_cuDevicePrimaryCtxRelease(dev); }

// Every call makes the device's primary context current on the calling
// thread first: goroutines move between threads, contexts do not.
static CUresult yb_alloc(CUcontext ctx, CUdeviceptr *p, size_t n) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemAlloc(p, n);
}
static CUresult yb_free(CUcontext ctx, CUdeviceptr p) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemFree(p);
}
static CUresult yb_htod(CUcontext ctx, CUdeviceptr dst, const void *src, size_t n) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemcpyHtoD(dst, src, n);
}
static CUresult yb_dtoh(CUcontext ctx, void *dst, CUdeviceptr src, size_t n) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemcpyDtoH(dst, src, n);
}
// yb_htod_batch queues n copies on stream s and waits for them all.
static CUresult yb_htod_batch(CUcontext ctx, CUstream s, int n, const CUdeviceptr *dst, const uintptr_t *src, const size_t *len) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	for (int i = 0; i < n && !r; i++) r = p_cuMemcpyHtoDAsync(dst[i], (const void *)src[i], len[i], s);
	CUresult w = p_cuStreamSynchronize(s);
	return r ? r : w;
}
// Non-blocking (1): the stream does not wait for work on the legacy
// default stream.
static CUresult yb_stream(CUcontext ctx, CUstream *s) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuStreamCreate(s, 1);
}
static CUresult yb_stream_destroy(CUcontext ctx, CUstream s) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuStreamDestroy(s);
}
// Portable (1): the pinned memory serves every context.
static CUresult yb_host_alloc(CUcontext ctx, void **p, size_t n) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemHostAlloc(p, n, 1);
}
static CUresult yb_host_free(CUcontext ctx, void *p) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemFreeHost(p);
}
// Portable (1), as yb_host_alloc's memory.
static CUresult yb_host_register(CUcontext ctx, void *p, size_t n) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemHostRegister(p, n, 1);
}
static CUresult yb_host_unregister(CUcontext ctx, void *p) {
	CUresult r = p_cuCtxSetCurrent(ctx);
	return r ? r : p_cuMemHostUnregister(p);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/rdma"
)

// ErrNoDriver reports a machine without a usable NVIDIA driver or GPU.
var ErrNoDriver = errors.New("hbmcuda: no CUDA driver or device")

// ErrRange reports a copy outside a page or into a page that is not
// allocated.
var ErrRange = errors.New("hbmcuda: range outside an allocated page")

// cudaErrorOutOfMemory is CUDA_ERROR_OUT_OF_MEMORY.
const cudaErrorOutOfMemory = 2

var driver struct {
	once sync.Once
	err  error
}

func openDriver() error {
	driver.once.Do(func() {
		var buf [256]C.char
		if C.yb_open(&buf[0], C.int(len(buf))) != 0 {
			driver.err = fmt.Errorf("%w: %s", ErrNoDriver, C.GoString(&buf[0]))
			return
		}
		if r := C.yb_init(); r != 0 {
			driver.err = fmt.Errorf("%w: cuInit: %s", ErrNoDriver, C.GoString(C.yb_errname(r)))
		}
	})
	return driver.err
}

func check(op string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("hbmcuda: %s: %s (%d)", op, C.GoString(C.yb_errname(r)), int(r))
}

// Devices is how many GPUs the driver sees, or ErrNoDriver.
func Devices() (int, error) {
	if err := openDriver(); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.yb_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Options size the device's KV pool.
type Options struct {
	// Ordinal is the GPU's index. Default 0.
	Ordinal int
	// PageBytes is the size of one page (a block's KV). Required.
	PageBytes int
	// Pages is how many pages the pool holds. Required.
	Pages int
}

// Device is a paged KV pool in a GPU's memory. It is safe for concurrent
// use.
type Device struct {
	opts  Options
	name  string
	model string
	dev   C.CUdevice
	ctx   C.CUcontext
	base  C.CUdeviceptr
	// streams holds idle CUDA streams for CopyInBatch, one per batch in
	// flight.
	streams chan C.CUstream
	pages   *adapter.PageSet
	mu      struct {
		sync.Mutex
		closed bool
	}
}

var (
	_ adapter.Device      = (*Device)(nil)
	_ adapter.BatchCopier = (*Device)(nil)
)

// maxStreams bounds the streams (and batches in flight) of one device.
const maxStreams = 8

// New allocates the pool on GPU opts.Ordinal.
func New(opts Options) (*Device, error) {
	if opts.PageBytes <= 0 || opts.Pages <= 0 || opts.Ordinal < 0 {
		return nil, fmt.Errorf("%w: hbmcuda: %d pages of %d bytes on GPU %d", adapter.ErrInvalid, opts.Pages, opts.PageBytes, opts.Ordinal)
	}
	n, err := Devices()
	if err != nil {
		return nil, err
	}
	if opts.Ordinal >= n {
		return nil, fmt.Errorf("%w: GPU %d asked for, %d present", ErrNoDriver, opts.Ordinal, n)
	}
	d := &Device{opts: opts, name: fmt.Sprintf("cuda:%d", opts.Ordinal)}
	var model [256]C.char
	if err := check("retaining the primary context", C.yb_retain(C.int(opts.Ordinal), &d.dev, &d.ctx, &model[0], C.int(len(model)))); err != nil {
		return nil, err
	}
	d.model = C.GoString(&model[0])
	size := C.size_t(opts.PageBytes) * C.size_t(opts.Pages)
	if r := C.yb_alloc(d.ctx, &d.base, size); r != 0 {
		C.yb_release(d.dev)
		err := check(fmt.Sprintf("cuMemAlloc of %d bytes", uint64(size)), r)
		if r == cudaErrorOutOfMemory {
			return nil, fmt.Errorf("%w: %w", adapter.ErrDeviceFull, err)
		}
		return nil, err
	}
	d.streams = make(chan C.CUstream, maxStreams)
	d.pages = adapter.NewPageSet(opts.Pages)
	return d, nil
}

// Close frees the pool and releases the context.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return nil
	}
	d.mu.closed = true
	var errs []error
	for len(d.streams) > 0 {
		errs = append(errs, check("cuStreamDestroy", C.yb_stream_destroy(d.ctx, <-d.streams)))
	}
	err := errors.Join(append(errs, check("cuMemFree", C.yb_free(d.ctx, d.base)))...)
	return errors.Join(err, check("releasing the primary context", C.yb_release(d.dev)))
}

// Name implements adapter.Device ("cuda:0").
func (d *Device) Name() string { return d.name }

// Model is the GPU's name as the driver reports it.
func (d *Device) Model() string { return d.model }

// PageBytes implements adapter.Device.
func (d *Device) PageBytes() int { return d.opts.PageBytes }

// Pages implements adapter.Device.
func (d *Device) Pages() int { return d.opts.Pages }

// Alloc implements adapter.Device.
func (d *Device) Alloc(n int) ([]adapter.Page, error) { return d.pages.Alloc(n) }

// Free implements adapter.Device. Freeing a page twice is a bug.
func (d *Device) Free(pages ...adapter.Page) { d.pages.Free("hbmcuda", pages...) }

// at checks a copy's range and returns its device address.
func (d *Device) at(p adapter.Page, off, n int) (C.CUdeviceptr, error) {
	if p < 0 || int(p) >= d.opts.Pages || off < 0 || n < 0 || off > d.opts.PageBytes || n > d.opts.PageBytes-off {
		return 0, fmt.Errorf("%w: page %d [%d, +%d) of %d", ErrRange, p, off, n, d.opts.PageBytes)
	}
	d.mu.Lock()
	closed := d.mu.closed
	d.mu.Unlock()
	if closed || !d.pages.Allocated(p) {
		return 0, fmt.Errorf("%w: page %d is free", ErrRange, p)
	}
	return d.base + C.CUdeviceptr(int(p)*d.opts.PageBytes+off), nil
}

// CopyIn implements adapter.Device: a synchronous host-to-device copy
// (at the bus's full speed from pinned memory, HostAlloc; slower from
// ordinary Go memory, which the driver stages itself).
func (d *Device) CopyIn(_ context.Context, p adapter.Page, off int, src []byte) error {
	dst, err := d.at(p, off, len(src))
	if err != nil || len(src) == 0 {
		return err
	}
	return check("cuMemcpyHtoD", C.yb_htod(d.ctx, dst, unsafe.Pointer(&src[0]), C.size_t(len(src))))
}

// CopyOut implements adapter.Device.
func (d *Device) CopyOut(_ context.Context, dst []byte, p adapter.Page, off int) error {
	src, err := d.at(p, off, len(dst))
	if err != nil || len(dst) == 0 {
		return err
	}
	return check("cuMemcpyDtoH", C.yb_dtoh(d.ctx, unsafe.Pointer(&dst[0]), src, C.size_t(len(dst))))
}

// CopyInBatch implements adapter.BatchCopier: the copies are queued on one
// stream and waited for once.
func (d *Device) CopyInBatch(ctx context.Context, spans []adapter.Span) error {
	n := len(spans)
	if n == 0 {
		return ctx.Err()
	}
	dst := make([]C.CUdeviceptr, 0, n)
	src := make([]C.uintptr_t, 0, n)
	size := make([]C.size_t, 0, n)
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, s := range spans {
		a, err := d.at(s.Page, s.Off, len(s.Src))
		if err != nil {
			return err
		}
		if len(s.Src) == 0 {
			continue
		}
		// The stream reads src after this call's cgo checks: pinned,
		// the memory stays put and alive until the sync.
		pin.Pin(&s.Src[0])
		dst = append(dst, a)
		src = append(src, C.uintptr_t(uintptr(unsafe.Pointer(&s.Src[0]))))
		size = append(size, C.size_t(len(s.Src)))
	}
	if len(dst) == 0 {
		return nil
	}
	var st C.CUstream
	select {
	case st = <-d.streams:
	default:
		if err := check("cuStreamCreate", C.yb_stream(d.ctx, &st)); err != nil {
			return err
		}
	}
	err := check("cuMemcpyHtoDAsync", C.yb_htod_batch(d.ctx, st, C.int(len(dst)), &dst[0], &src[0], &size[0]))
	select {
	case d.streams <- st:
	default:
		C.yb_stream_destroy(d.ctx, st)
	}
	return err
}

// Register implements adapter.Device. Registering HBM with a NIC is
// GPUDirect RDMA, which needs an RDMA NIC and the peer-memory module; the
// TCP and shared-memory transports cannot read device memory, so this
// answers errors.ErrUnsupported and loads go through adapter.Staging.
func (d *Device) Register(*rdma.Engine, string) (*rdma.Segment, error) {
	return nil, fmt.Errorf("hbmcuda: registering %s for transfers (GPUDirect RDMA): %w", d.name, errors.ErrUnsupported)
}

// Offset implements adapter.Device.
func (d *Device) Offset(p adapter.Page) uint64 { return uint64(p) * uint64(d.opts.PageBytes) }

// HostBuffer is pinned (page-locked) host memory: host-to-device copies
// from it run at the bus's speed, without the driver's own staging copy.
type HostBuffer struct {
	d   *Device
	ptr unsafe.Pointer
	buf []byte
}

// HostAlloc allocates n bytes of pinned host memory for d.
func (d *Device) HostAlloc(n int) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: pinned allocation of %d bytes", adapter.ErrInvalid, n)
	}
	var p unsafe.Pointer
	if err := check(fmt.Sprintf("cuMemHostAlloc of %d bytes", n), C.yb_host_alloc(d.ctx, &p, C.size_t(n))); err != nil {
		return nil, err
	}
	return &HostBuffer{d: d, ptr: p, buf: unsafe.Slice((*byte)(p), n)}, nil
}

// Bytes is the buffer's memory, valid until Close.
func (h *HostBuffer) Bytes() []byte { return h.buf }

// Close frees the buffer.
func (h *HostBuffer) Close() error {
	if h.ptr == nil {
		return nil
	}
	err := check("cuMemFreeHost", C.yb_host_free(h.d.ctx, h.ptr))
	h.ptr, h.buf = nil, nil
	return err
}

// HostRegistration is host memory allocated elsewhere and page-locked for
// the device: the staging memory of adapter.NewRegionStaging, which the
// node on this host writes blocks into itself, so that a Load reaches HBM
// with the node's copy and the upload only, and the upload runs at the
// bus's speed as from HostAlloc's memory.
type HostRegistration struct {
	d   *Device
	ptr unsafe.Pointer
}

// HostRegister page-locks b for d (cuMemHostRegister, portable to every
// context) until Close, which must come before b's memory is unmapped.
// b must not be Go heap memory, which the collector may move: pass
// memory from mmap, such as adapter.Staging.Bytes of NewRegionStaging.
func (d *Device) HostRegister(b []byte) (*HostRegistration, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: page-locking 0 bytes", adapter.ErrInvalid)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if err := check(fmt.Sprintf("cuMemHostRegister of %d bytes", len(b)), C.yb_host_register(d.ctx, p, C.size_t(len(b)))); err != nil {
		return nil, err
	}
	return &HostRegistration{d: d, ptr: p}, nil
}

// Close unlocks the memory; the memory itself stays its owner's.
func (h *HostRegistration) Close() error {
	if h.ptr == nil {
		return nil
	}
	err := check("cuMemHostUnregister", C.yb_host_unregister(h.d.ctx, h.ptr))
	h.ptr = nil
	return err
}
