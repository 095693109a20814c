package tier

import (
	"errors"

	"github.com/yuebing/yuebing/block"
)

var (
	// ErrNotFound: no block with this key.
	ErrNotFound = errors.New("tier: block not found")
	// ErrExists: a block with this key is already stored; it was not
	// rewritten (blocks are immutable).
	ErrExists = errors.New("tier: block already exists")
	// ErrNoSpace: room could not be made, because what is stored is pinned
	// or being read.
	ErrNoSpace = errors.New("tier: no space")
	// ErrTooLarge: the block is larger than the tier can ever hold.
	ErrTooLarge = errors.New("tier: block too large")
	// ErrChecksum: the value does not match the checksum the caller gave.
	ErrChecksum = errors.New("tier: checksum mismatch")
	// ErrSize: a Writer was committed with fewer or more bytes than reserved.
	ErrSize = errors.New("tier: size mismatch")
	// ErrCorrupt: a stored block failed verification; it was dropped.
	ErrCorrupt = block.ErrCorrupt
	// ErrMeta: PutOptions.Meta is longer than MaxMeta.
	ErrMeta = errors.New("tier: block metadata too large")
	// ErrUnavailable: the tier cannot do this now because its device is
	// failing (an I/O error, a full disk, a failed flush). Nothing was
	// stored; the tier says why in its Health and recovers by itself once
	// the device does.
	ErrUnavailable = errors.New("tier: unavailable")
	// ErrClosed: the tier or hierarchy is closed.
	ErrClosed = errors.New("tier: closed")
)
