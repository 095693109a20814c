package kvevents

import (
	"sync/atomic"
	"time"
)

// Stats counts what a Subscriber (and its Mapper) saw. Fields are updated
// atomically and may be read at any time; several subscribers may share one
// Stats to count a fleet.
type Stats struct {
	// Batches decoded and applied, live or replayed.
	Batches atomic.Int64
	// Events by kind.
	Stored, Removed, Cleared atomic.Int64
	// Gaps are jumps in the sequence numbers of live batches.
	Gaps atomic.Int64
	// Replayed batches, fetched from the replay socket to fill gaps.
	Replayed atomic.Int64
	// Unrecovered gaps: the replay socket was absent, failed, or no longer
	// had the missing batches; the engine's view was reset.
	Unrecovered atomic.Int64
	// Malformed messages or payloads, logged and skipped; a malformed
	// payload also resets the engine's view, as lost events do (it is
	// counted in Unrecovered too).
	Malformed atomic.Int64
	// UnknownEvents are events of kinds a newer engine release added,
	// skipped.
	UnknownEvents atomic.Int64
	// Restarts are engines whose sequence numbers went back.
	Restarts atomic.Int64
	// Reconnects are connections to the PUB socket after the first.
	Reconnects atomic.Int64
	// Rejected are ZMQ peers dropped for breaking the framing or its
	// limits (Options.Frames), or refused past Options.MaxPeers.
	Rejected atomic.Int64
	// Orphans are stored blocks whose parent was unknown, so could not be
	// keyed; Unkeyable are blocks of a LoRA adapter, of a block size no key takes,
	// hashed over more than tokens, or sent without a block's worth of
	// tokens each (Event.Unkeyable); UnknownRemoved are removals of
	// blocks never seen stored.
	Orphans, Unkeyable, UnknownRemoved atomic.Int64
	// OtherBlockSize counts stored events of another block size than
	// the configured one (Options.BlockSize); BlockSizeChanges the times
	// the engine's events changed the block size keys are chained with
	// (the first such event, and any later change).
	OtherBlockSize, BlockSizeChanges atomic.Int64
	// Overflows are resets because an engine reported more blocks than
	// Options.MaxBlocks.
	Overflows atomic.Int64
	// LagNanos is the lag of the latest live batch: receive time minus
	// the engine's timestamp (clock skew between hosts included).
	LagNanos atomic.Int64
}

// Lag returns the lag of the latest live batch.
func (s *Stats) Lag() time.Duration { return time.Duration(s.LagNanos.Load()) }
