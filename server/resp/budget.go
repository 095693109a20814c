package resp

import (
	"fmt"
	"sync/atomic"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// admit takes a streamed value's length from the in-flight budget. msg,
// when not empty, is the error reply for a value the budget refused.
func (s *Server) admit(size int64) (release func(), msg string) {
	if s.opts.Budget == nil {
		return func() {}, ""
	}
	release, err := s.opts.Budget.Acquire(s.ctx, size)
	if err != nil {
		return nil, fmt.Sprintf("ERR value of %d bytes not admitted: %v", size, err)
	}
	return release, ""
}

// admitRead charges a read of key to the budget when the store holds it
// only below the top tier: such a read copies the value into the heap. A
// top-tier read is a pinned view of the arena and costs nothing: release
// is then nil.
func (s *Server) admitRead(key block.Key, size int64) (release func(), msg string) {
	if s.opts.Budget == nil {
		return nil, ""
	}
	if e, ok := s.store.Lookup(key); !ok || e.Tiers.Top() == 0 {
		return nil, ""
	}
	release, err := s.opts.Budget.Acquire(s.ctx, size)
	if err != nil {
		return nil, fmt.Sprintf("ERR read of %d bytes not admitted: %v", size, err)
	}
	return release, ""
}

// withRelease returns a handle on h's bytes that also calls release once
// it and every clone of it are released; with a nil release, h itself.
func withRelease(h *tier.Handle, release func()) *tier.Handle {
	if release == nil {
		return h
	}
	r := &budgetRef{h: h, release: release}
	r.refs.Store(1)
	if sum, ok := h.KnownChecksum(); ok {
		return tier.NewHandle(h.Bytes(), sum, r)
	}
	return tier.NewLazyHandle(h.Bytes(), r)
}

// budgetRef is the tier.Ref of a handle made by withRelease.
type budgetRef struct {
	h       *tier.Handle
	release func()
	refs    atomic.Int32
}

func (r *budgetRef) Retain() { r.refs.Add(1) }

func (r *budgetRef) Release() {
	if r.refs.Add(-1) == 0 {
		r.h.Release()
		r.release()
	}
}
