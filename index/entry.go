package index

import "fmt"

// MaxTiers is how many tiers a TierMask can name.
const MaxTiers = 8

// TierMask is a set of tiers, bit i for tier i of a hierarchy (0 = fastest).
type TierMask uint8

// Has reports whether tier i is in the set.
func (m TierMask) Has(i int) bool { return m&(1<<uint(i)) != 0 }

// With returns the set plus tier i.
func (m TierMask) With(i int) TierMask { return m | 1<<uint(i) }

// Without returns the set minus tier i.
func (m TierMask) Without(i int) TierMask { return m &^ (1 << uint(i)) }

// Top returns the fastest tier in the set, or -1 if it is empty.
func (m TierMask) Top() int {
	for i := 0; i < MaxTiers; i++ {
		if m.Has(i) {
			return i
		}
	}
	return -1
}

func (m TierMask) String() string { return fmt.Sprintf("%08b", uint8(m)) }

// Entry is what the index knows about one block.
type Entry struct {
	// Tiers that hold a copy of the block.
	Tiers TierMask
	// Flags are free for the owner's use.
	Flags uint8
	// Size of the block's value in bytes.
	Size uint32
	// Checksum is the CRC-32C of the value.
	Checksum uint32
	// Loc is a location inside the top tier, meaning is the tier's own.
	Loc uint64
	// PinnedUntil is when the block's soft pin lapses, in Unix seconds;
	// 0 means not pinned.
	PinnedUntil uint32
	// Access is when the block was last used, in Unix seconds.
	Access uint32
}

// packed is an Entry in the three words an index slot stores; Access lives in
// a word of its own so Touch can update it without a writer's lock.
func (e Entry) pack() (w0, w1, w2 uint64) {
	w0 = e.Loc
	w1 = uint64(e.Size) | uint64(e.Checksum)<<32
	w2 = uint64(e.Tiers) | uint64(e.Flags)<<8 | uint64(e.PinnedUntil)<<32
	return
}

func unpack(w0, w1, w2, w3 uint64) Entry {
	return Entry{
		Loc:         w0,
		Size:        uint32(w1),
		Checksum:    uint32(w1 >> 32),
		Tiers:       TierMask(w2),
		Flags:       uint8(w2 >> 8),
		PinnedUntil: uint32(w2 >> 32),
		Access:      uint32(w3),
	}
}
