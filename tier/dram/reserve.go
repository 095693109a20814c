package dram

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Reservation is space of the arena taken by Reserve for memory the tier
// does not hold itself. It is safe for concurrent use.
type Reservation struct {
	d    *DRAM
	span int32
	size int64
	once sync.Once
}

// Size is the reservation's length in bytes (n rounded up to a granule).
func (r *Reservation) Size() int64 { return r.size }

// Reserve takes n bytes of the arena's capacity, evicting blocks as a put
// of n bytes would (through the evict handler, so they are demoted), and
// holds them until Release. The reserved span's pages are given back to
// the kernel, so the caller can keep memory of its own (the RESP front
// end's inline values) inside the tier's capacity: what the arena holds
// plus what reservations stand for never exceeds Capacity. Stats.Used
// counts reservations. It fails as a put does (tier.ErrNoSpace when every
// block is pinned, tier.ErrTooLarge beyond MaxBlockSize).
func (d *DRAM) Reserve(ctx context.Context, n int64) (*Reservation, error) {
	if n <= 0 || n > d.opts.MaxBlockSize {
		return nil, fmt.Errorf("dram: reservation of %d bytes must be in (0, %d]", n, d.opts.MaxBlockSize)
	}
	d.mu.Lock()
	id, err := d.reserveLocked(ctx, granules(n))
	if err != nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("dram: reserving %d bytes: %w", n, err)
	}
	s := d.mu.alloc.spans[id]
	off, size := s.off<<granuleShift, s.size<<granuleShift
	// The arena stays mapped while the lock is held: Close unmaps it only
	// once no handle is out, and a reservation never touches its bytes
	// again after this.
	if d.arena != nil {
		// Best effort: a page left resident is only memory counted twice.
		_ = unix.Madvise(d.arena[off:off+size], unix.MADV_DONTNEED)
	}
	d.mu.Unlock()
	return &Reservation{d: d, span: id, size: size}, nil
}

// Release gives the space back to the tier. Further calls do nothing.
func (r *Reservation) Release() {
	r.once.Do(func() {
		d := r.d
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.mu.closed {
			return
		}
		d.freeLocked(r.span)
	})
}
