package tier

import (
	"context"
	"io"
	"time"

	"github.com/yuebing/yuebing/block"
)

// Tier is one level of the block store. All methods are safe for concurrent
// use.
type Tier interface {
	// Name identifies the tier in stats and logs ("dram", "ssd").
	Name() string
	// Put stores a copy of value under key. A key that is already stored is
	// not rewritten: Put returns ErrExists. It returns ErrTooLarge for a
	// value the tier can never hold and ErrNoSpace when room cannot be made.
	// It may wait for room (evicted blocks still being read or demoted) until
	// ctx is done.
	Put(ctx context.Context, key block.Key, value []byte, opts PutOptions) error
	// Create reserves room for a block of size bytes and returns a Writer to
	// fill it; the block becomes visible when the Writer commits. Errors are
	// as for Put, except that ErrExists may also come from Commit.
	Create(ctx context.Context, key block.Key, size int64, opts PutOptions) (Writer, error)
	// Get returns a pinned view of the block. The caller must Release it.
	// Media that cannot be read in place (SSD) return a private copy,
	// verified against its checksum; a corrupt block is dropped and Get
	// returns an error wrapping ErrCorrupt.
	Get(ctx context.Context, key block.Key) (*Handle, error)
	// Stat returns a block's metadata without reading it.
	Stat(key block.Key) (BlockInfo, error)
	// Delete removes the block. Readers holding a Handle keep their view;
	// the space is reclaimed when the last one releases it.
	Delete(key block.Key) error
	// Pin sets the block's soft pin: it is not evicted before until. A zero
	// or past time unpins it.
	Pin(key block.Key, until time.Time) error
	// Range calls fn for every stored block until fn returns false. It sees
	// a consistent entry for each block but not a snapshot of the whole tier.
	Range(fn func(key block.Key, info BlockInfo) bool)
	// Stats returns the tier's counters.
	Stats() Stats
	// Close releases the tier's resources. Blocks that outlive Close (SSD)
	// are flushed first.
	Close() error
}

// PutOptions qualify a put.
type PutOptions struct {
	// Checksum, when HasChecksum is set, is the CRC-32C the caller computed;
	// the tier verifies the stored bytes against it before committing and
	// returns ErrChecksum (storing nothing) on a mismatch.
	Checksum    uint32
	HasChecksum bool
	// Parent is the block before this one in its prefix chain, when known;
	// prefix-aware eviction policies use it.
	Parent    block.Key
	HasParent bool
	// PinnedUntil soft-pins the block from the moment it is committed.
	PinnedUntil time.Time
	// Retention is the block's retention class (see Retention), kept with
	// it in every tier that records classes; RetainUntil, when not zero,
	// is when it lapses back to Normal.
	Retention   Retention
	RetainUntil time.Time
	// Meta is a small record stored with the block and returned by Stat and
	// Range, at most MaxMeta bytes: the raw name behind an opaque key, an
	// expiry. It counts toward the tier's capacity.
	Meta []byte
}

// MaxMeta is the largest PutOptions.Meta.
const MaxMeta = 512

// BlockInfo is a stored block's metadata.
type BlockInfo struct {
	Size int64
	// Checksum is the CRC-32C of the block when HasChecksum is set. A DRAM
	// block's checksum is computed on first use (see tier/dram), so it may
	// not be known yet; Handle.Checksum computes it.
	Checksum    uint32
	HasChecksum bool
	// Version identifies this copy of the block in its tier: a block put
	// again after a delete, or while its old copy is being evicted, is a new
	// copy with a new version. The hierarchy uses it to tell an eviction or
	// demotion of an old copy from the current one.
	Version     uint64
	PinnedUntil time.Time // zero when not pinned
	Meta        []byte    // as stored with PutOptions.Meta; the caller may keep it
	// Retention and RetainUntil are the class as recorded (see
	// RetentionOf for the class in force now).
	Retention   Retention
	RetainUntil time.Time
}

// Writer fills a block reserved by Tier.Create. Writes are sequential. A
// Writer is not safe for concurrent use.
type Writer interface {
	io.Writer
	io.ReaderFrom
	// Commit makes the block visible. It fails with ErrSize unless exactly
	// the reserved size was written, ErrChecksum if the options carried a
	// checksum the bytes do not match, and ErrExists if another writer
	// committed the same key first. On any error nothing is stored.
	Commit(ctx context.Context) error
	// Abort discards the block. It is safe to call after Commit (a no-op).
	Abort()
}

// EvictHandler receives a block a tier evicts to make room, so the block can
// be demoted to a lower tier. h pins the block's bytes; the handler owns it
// and must Release it, possibly later from another goroutine. The tier keeps
// serving the block until the handler returns, and reclaims the space when h
// is released. h is nil when the tier cannot offer the bytes (the bottom tier
// of a hierarchy), which means the block is simply gone.
//
// A handler that blocks holds up the put that needed the room; that is how a
// full demotion queue applies back-pressure. It is called without the tier's
// locks held, and must not call back into the evicting tier.
type EvictHandler func(ctx context.Context, key block.Key, info BlockInfo, h *Handle)

// EvictNotifier is implemented by tiers that report evictions.
type EvictNotifier interface {
	SetEvictHandler(EvictHandler)
}

// Stats are a tier's counters. Counts are cumulative since the tier opened.
type Stats struct {
	Name      string `json:"name"`
	Capacity  int64  `json:"capacity_bytes"`
	Used      int64  `json:"used_bytes"`   // bytes allocated, including blocks being written or evicted
	Blocks    int64  `json:"blocks"`       // committed blocks
	Pinned    int64  `json:"pinned_bytes"` // bytes of soft-pinned blocks
	Hits      int64  `json:"hits"`
	Misses    int64  `json:"misses"`
	Puts      int64  `json:"puts"`
	Deletes   int64  `json:"deletes"`
	Evictions int64  `json:"evictions"`
	Corrupt   int64  `json:"corrupt"` // blocks dropped because they failed verification
	// Demotions and Promotions are filled in by a Hierarchy: blocks moved
	// from this tier to the next one down, and blocks copied up into it.
	Demotions  int64 `json:"demotions"`
	Promotions int64 `json:"promotions"`
}

// Health is a tier's view of its device. A degraded tier refuses writes
// (ErrUnavailable) and serves the reads it can verify until it recovers.
type Health struct {
	Degraded bool `json:"degraded"`
	// Cause names the kind of fault while degraded: "read", "write",
	// "sync", "create", "no_space" or "index".
	Cause string `json:"cause,omitempty"`
	// Reason is the error that degraded the tier.
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// IOErrors counts failed operations since the tier opened, by the
	// same names as Cause (but "no_space" counts under its operation).
	IOErrors map[string]int64 `json:"io_errors,omitempty"`
	// Recoveries counts the times the tier left the degraded state.
	Recoveries int64 `json:"recoveries"`
}

// HealthReporter is implemented by tiers whose device can fail (SSD).
type HealthReporter interface {
	Health() Health
}

// KeyInfo pairs a key with its metadata, for tiers' Range snapshots.
type KeyInfo struct {
	Key  block.Key
	Info BlockInfo
}

// Visit calls fn for each item until it returns false. Tiers take a snapshot
// under their lock and visit it after releasing the lock, so fn may call
// back into the tier.
func Visit(items []KeyInfo, fn func(block.Key, BlockInfo) bool) {
	for _, it := range items {
		if !fn(it.Key, it.Info) {
			return
		}
	}
}
