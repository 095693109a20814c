package tier

import "github.com/yuebing/yuebing/block"

// The sentinels are block.Sentinels, named by their Go names, so the table
// of HTTP answers maps them without importing this package.
var (
	// ErrNotFound: no block with this key.
	ErrNotFound error = block.NewSentinel("tier.ErrNotFound", "tier: block not found")
	// ErrExists: a block with this key is already stored; it was not
	// rewritten (blocks are immutable).
	ErrExists error = block.NewSentinel("tier.ErrExists", "tier: block already exists")
	// ErrNoSpace: room could not be made, because what is stored is pinned
	// or being read.
	ErrNoSpace error = block.NewSentinel("tier.ErrNoSpace", "tier: no space")
	// ErrTooLarge: the block is larger than the tier can ever hold.
	ErrTooLarge error = block.NewSentinel("tier.ErrTooLarge", "tier: block too large")
	// ErrChecksum: the value does not match the checksum the caller gave.
	ErrChecksum error = block.NewSentinel("tier.ErrChecksum", "tier: checksum mismatch")
	// ErrSize: a Writer was committed with fewer or more bytes than reserved.
	ErrSize error = block.NewSentinel("tier.ErrSize", "tier: size mismatch")
	// ErrCorrupt: a stored block failed verification; it was dropped.
	ErrCorrupt = block.ErrCorrupt
	// ErrMeta: PutOptions.Meta is longer than MaxMeta.
	ErrMeta error = block.NewSentinel("tier.ErrMeta", "tier: block metadata too large")
	// ErrUnavailable: the tier cannot do this now because its device is
	// failing (an I/O error, a full disk, a failed flush). Nothing was
	// stored; the tier says why in its Health and recovers by itself once
	// the device does.
	ErrUnavailable error = block.NewSentinel("tier.ErrUnavailable", "tier: unavailable")
	// ErrRetention: a retention class that is not one of the classes.
	ErrRetention error = block.NewSentinel("tier.ErrRetention", "tier: unknown retention class")
	// ErrClosed: the tier or hierarchy is closed.
	ErrClosed error = block.NewSentinel("tier.ErrClosed", "tier: closed")
)
