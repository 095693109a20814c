// Package dram is the DRAM tier: blocks in an off-heap arena.
//
// The arena is one anonymous mmap of the tier's capacity, outside the Go heap,
// so gigabytes of KV blocks neither count toward GOGC nor get scanned by the
// garbage collector, and the process's resident memory for blocks can never
// exceed the configured capacity. A TLSF allocator places variable-size
// blocks in it at 64-byte granularity.
//
// Reads are zero-copy: Get pins the block and returns a view of the arena; the
// server writes that view straight to a socket, and the block cannot be
// evicted or its memory reused until the view is released. Writes reserve
// space first and fill it in place (Create returns a Writer that can read a
// request body directly into the arena), then commit.
//
//	t, err := dram.New(dram.Options{Capacity: 4 << 30})
//	err = t.Put(ctx, key, value, tier.PutOptions{})
//	h, err := t.Get(ctx, key)
//	conn.Write(h.Bytes())
//	h.Release()
//
// When it needs room the tier evicts by its policy (LRU by default, any name
// policy.New knows), skipping blocks being read and soft-pinned blocks, and
// hands each victim to the EvictHandler (the hierarchy's demotion queue) with
// a pin on its bytes, so demotion copies from the arena without an extra
// buffer. The victim's space is reclaimed when that pin is released.
package dram
