// Package hbmsim is a simulator of accelerator memory (HBM): it implements
// adapter.Device in host memory, so the HBM tier, the engine simulator and
// their tests run on a machine without a GPU. Nothing in it pretends to be
// faster than host memory is; its copies are memmoves.
//
// The memory is one memfd (rdma.SharedMemory) cut into pages, so it can be
// registered with the transfer service and mapped by a same-host peer over
// the shared-memory transport, as GPUDirect registers HBM with a NIC.
//
//	d, _ := hbmsim.New(hbmsim.Options{PageBytes: layout.BlockBytes(), Pages: 1024})
//	pages, _ := d.Alloc(4)
//	d.CopyIn(ctx, pages[0], 0, kv)
package hbmsim
