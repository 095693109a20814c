package rdma

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
)

// MaxNameLen bounds segment names and location tags, so a peer's open
// request or descriptor has a small fixed upper size.
const MaxNameLen = 255

// Segment is local memory registered with an Engine under a name, so peers
// can read and write it. The memory belongs to the caller; the engine and
// its transport touch it only while a transfer holds a pin, and never after
// Unregister returns.
//
// A Segment is safe for concurrent use. Concurrent transfers into
// overlapping ranges race exactly as concurrent RDMA writes would: ordering
// them is the caller's job.
type Segment struct {
	name     string
	location string
	id       uint64
	mem      []byte
	shared   *SharedMemory
	reg      *Registry
	pins     pins
}

// Name returns the name the segment was registered under.
func (s *Segment) Name() string { return s.name }

// Location returns the segment's memory location tag, such as "cpu:0".
func (s *Segment) Location() string { return s.location }

// ID returns the segment's wire identifier. It is unique within the
// registry's lifetime and, thanks to a random epoch, unlikely to repeat across
// restarts, so a stale remote handle cannot reach a new segment.
func (s *Segment) ID() uint64 { return s.id }

// Size returns the segment's length in bytes.
func (s *Segment) Size() uint64 { return uint64(len(s.mem)) }

// Bytes returns the registered memory. Transports use it while they hold a
// pin (see Registry.Acquire).
func (s *Segment) Bytes() []byte { return s.mem }

// Shared returns the shared memory behind the segment, or nil when it was
// registered as a plain byte slice.
func (s *Segment) Shared() *SharedMemory { return s.shared }

// Release drops a pin taken by Registry.Acquire.
func (s *Segment) Release() { s.pins.release() }

// Registry holds an engine's local segments. Transports look segments up in
// it to serve peers. It is safe for concurrent use.
type Registry struct {
	epoch uint64
	mu    struct {
		sync.RWMutex
		next   uint64
		byName map[string]*Segment
		byID   map[uint64]*Segment
	}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	r := &Registry{epoch: uint64(binary.LittleEndian.Uint32(b[:])) << 32}
	r.mu.byName = map[string]*Segment{}
	r.mu.byID = map[uint64]*Segment{}
	return r
}

func (r *Registry) add(name, location string, mem []byte, shared *SharedMemory) (*Segment, error) {
	if err := validName("segment name", name); err != nil {
		return nil, err
	}
	if err := validName("location", location); err != nil {
		return nil, err
	}
	if len(mem) == 0 {
		return nil, fmt.Errorf("%w: segment %q has no memory", ErrInvalidRequest, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.mu.byName[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrSegmentExists, name)
	}
	r.mu.next++
	s := &Segment{name: name, location: location, id: r.epoch | r.mu.next&0xffffffff, mem: mem, shared: shared, reg: r}
	r.mu.byName[name] = s
	r.mu.byID[s.id] = s
	return s, nil
}

// remove withdraws the segment and waits for its pins. The name stays taken
// until the wait succeeds, so an Unregister that gave up can be retried.
func (r *Registry) remove(ctx context.Context, name string) error {
	r.mu.RLock()
	s, ok := r.mu.byName[name]
	r.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrSegmentNotFound, name)
	}
	if err := s.pins.close(ctx); err != nil {
		return fmt.Errorf("rdma: unregister %q: %w", name, err)
	}
	r.mu.Lock()
	if r.mu.byName[name] == s {
		delete(r.mu.byName, name)
		delete(r.mu.byID, s.id)
	}
	r.mu.Unlock()
	return nil
}

// Lookup returns the segment registered under name, without pinning it. A
// segment being unregistered is not found.
func (r *Registry) Lookup(name string) (*Segment, error) {
	r.mu.RLock()
	s, ok := r.mu.byName[name]
	r.mu.RUnlock()
	if !ok || s.pins.isClosed() {
		return nil, fmt.Errorf("%w: %q", ErrSegmentNotFound, name)
	}
	return s, nil
}

// Acquire returns the segment with the given ID, pinned: its memory stays
// registered until the caller calls Release.
func (r *Registry) Acquire(id uint64) (*Segment, error) {
	r.mu.RLock()
	s, ok := r.mu.byID[id]
	r.mu.RUnlock()
	if !ok || !s.pins.acquire() {
		return nil, fmt.Errorf("%w: id %#x", ErrSegmentNotFound, id)
	}
	return s, nil
}

// Len returns the number of registered segments.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.mu.byName)
}

// CheckRange reports whether [off, off+n) lies inside a buffer of size bytes,
// without overflowing. A zero-length range is invalid: no transfer moves
// nothing.
func CheckRange(size, off, n uint64) error {
	if n == 0 {
		return fmt.Errorf("%w: zero length", ErrInvalidRequest)
	}
	if off > size || n > size-off {
		return fmt.Errorf("%w: [%d, %d+%d) in %d bytes", ErrOutOfRange, off, off, n, size)
	}
	return nil
}

func validName(what, s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("%w: %s must be 1 to %d bytes, got %d", ErrInvalidRequest, what, MaxNameLen, len(s))
	}
	return nil
}
