package policy

import (
	"fmt"
	"strings"
)

// Info describes a block when it is added.
type Info[K comparable] struct {
	// Size of the block, in the owner's unit. Zero counts as one.
	Size int64
	// Parent is the block before this one in its prefix chain, when the owner
	// knows it (HasParent). A block whose parent is gone can no longer be part
	// of a prefix hit, which prefix-aware policies use.
	Parent    K
	HasParent bool
	// Class is the block's eviction class for Classed: every evictable
	// block of a lower class goes before any of a higher one. Other
	// policies ignore it.
	Class int
}

// Policy orders the blocks of one cache for eviction. Implementations are not
// safe for concurrent use.
type Policy[K comparable] interface {
	// Add records a block that was just inserted. Adding a key the policy
	// already tracks is a caller bug.
	Add(k K, info Info[K])
	// Access records a hit on a tracked block; untracked keys are ignored.
	Access(k K)
	// Remove forgets a block that the owner deleted. Untracked keys are ignored.
	Remove(k K)
	// Evict chooses the next victim among tracked blocks for which evictable
	// returns true, stops tracking it and returns it. It returns false when no
	// tracked block is evictable. evictable may be nil (everything is).
	Evict(evictable func(K) bool) (K, bool)
	// Len returns the number of tracked blocks.
	Len() int
}

// Names lists the policies New knows, in the order reports show them.
var Names = []string{"lru", "fifo", "lfu", "sieve", "s3fifo", "arc", "prefix"}

// New makes the named policy for a cache of the given capacity (in the
// owner's size unit; policies that size internal queues need it, the others
// ignore it but still require it to be positive, so that switching policies
// never turns a working configuration into a failing one).
func New[K comparable](name string, capacity int64) (Policy[K], error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrCapacity, capacity)
	}
	switch name {
	case "lru":
		return NewLRU[K](), nil
	case "fifo":
		return NewFIFO[K](), nil
	case "lfu":
		return NewLFU[K](), nil
	case "sieve":
		return NewSIEVE[K](), nil
	case "s3fifo":
		return NewS3FIFO[K](capacity), nil
	case "arc":
		return NewARC[K](capacity), nil
	case "prefix":
		return NewPrefix[K](capacity), nil
	}
	return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknownPolicy, name, strings.Join(Names, ", "))
}
