package ssd

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Read buffers are pooled by power-of-two size class: a cold read of a
// 16 MiB block would otherwise allocate, and zero, 16 MiB every time.
const (
	minPoolShift = 12 // 4 KiB
	maxPoolShift = 28 // 256 MiB, the largest block
)

var bufPools [maxPoolShift + 1]sync.Pool

func poolClass(n int) int {
	if n <= 1<<minPoolShift {
		return minPoolShift
	}
	return bits.Len(uint(n - 1))
}

// pooledBuf is a read buffer shared by a Handle and its clones; the last
// Release returns it to its pool. It implements tier.Ref.
type pooledBuf struct {
	b    []byte
	refs atomic.Int32
}

func getBuf(n int) *pooledBuf {
	c := poolClass(n)
	if c > maxPoolShift {
		pb := &pooledBuf{b: make([]byte, n)}
		pb.refs.Store(1)
		return pb
	}
	if v := bufPools[c].Get(); v != nil {
		pb := v.(*pooledBuf)
		pb.b = pb.b[:n]
		pb.refs.Store(1)
		return pb
	}
	pb := &pooledBuf{b: make([]byte, n, 1<<c)}
	pb.refs.Store(1)
	return pb
}

func (pb *pooledBuf) Retain() { pb.refs.Add(1) }

func (pb *pooledBuf) Release() {
	switch n := pb.refs.Add(-1); {
	case n > 0:
		return
	case n < 0:
		panic("BUG: ssd: read buffer released more often than retained")
	}
	if c := poolClass(cap(pb.b)); c <= maxPoolShift && cap(pb.b) == 1<<c {
		bufPools[c].Put(pb)
	}
}
