package tier

import (
	"context"
	"errors"

	"github.com/yuebing/yuebing/block"
)

// Get returns a pinned view of the block from the fastest tier holding it,
// and that tier's position (0 = fastest). The caller must Release the
// handle. A copy found corrupt in a tier is dropped there and the next copy
// is tried. When no local tier has the block and a RemoteReader is set, the
// block is read from another node and the position is RemoteLevel; Fetch
// also says which node.
func (h *Hierarchy) Get(ctx context.Context, key block.Key) (*Handle, int, error) {
	hd, o, err := h.Fetch(ctx, key)
	return hd, o.Level, err
}

// Fetch returns a pinned view of the block from the fastest local tier
// holding it or, failing that, from the RemoteReader, and says where it came
// from. The caller must Release the handle.
func (h *Hierarchy) Fetch(ctx context.Context, key block.Key) (*Handle, Origin, error) {
	hd, level, err := h.getLocal(ctx, key)
	if err == nil {
		h.accessed(key, hd.Len())
		return hd, Origin{Level: level}, nil
	}
	r := h.hooks.remote.Load()
	if r == nil || !errors.Is(err, ErrNotFound) {
		return nil, Origin{Level: -1}, err
	}
	hd, o, rerr := (*r).ReadRemote(ctx, key)
	if rerr != nil {
		if errors.Is(rerr, ErrNotFound) {
			return nil, Origin{Level: -1}, err
		}
		return nil, Origin{Level: -1}, rerr
	}
	o.Level = RemoteLevel
	h.accessed(key, hd.Len())
	return hd, o, nil
}

// GetLocal is Get without the RemoteReader and without access listeners: a
// node serving a block to another node uses it, so the reader's access is
// not counted twice and a miss never turns into a fetch of its own.
func (h *Hierarchy) GetLocal(ctx context.Context, key block.Key) (*Handle, int, error) {
	return h.getLocal(ctx, key)
}

func (h *Hierarchy) getLocal(ctx context.Context, key block.Key) (*Handle, int, error) {
	if h.closed.Load() {
		return nil, -1, ErrClosed
	}
	e, ok := h.ix.Get(key)
	if !ok && h.discover(key) {
		e, ok = h.ix.Get(key)
	}
	if !ok {
		h.Missed()
		return nil, -1, ErrNotFound
	}
	var corrupt error
	for level, t := range h.tiers {
		if !e.Tiers.Has(level) {
			h.counters[level].skipped.Add(1)
			continue
		}
		hd, err := t.Get(ctx, key)
		switch {
		case err == nil:
			h.hits.Add(1)
			h.ix.Touch(key, uint32(h.opts.Now().Unix()))
			if level > 0 {
				h.maybePromote(key, hd)
			}
			return hd, level, nil
		case errors.Is(err, ErrNotFound):
			if hd := h.inflightHandle(key, level); hd != nil {
				h.hits.Add(1)
				return hd, level, nil
			}
			h.clearCopy(key, level, e.Loc) // evicted since the index was read
		case errors.Is(err, ErrCorrupt):
			corrupt = err
			h.clearCopy(key, level, e.Loc)
		case errors.Is(err, ErrUnavailable) && isShared(t):
			// A shared tier's bucket is failing: its copy is kept for
			// when it recovers, and the read is a miss rather than an
			// error for the client, who recomputes the block. A local
			// device's failure stays an error (503), as the node's own.
		default:
			return nil, -1, err
		}
	}
	h.misses.Add(1)
	if corrupt != nil {
		return nil, -1, corrupt
	}
	return nil, -1, ErrNotFound
}

// Missed counts a read of a block that found nothing without calling Get:
// a front end whose own records (a tenant's namespace, a name's expiry)
// answer before the store is read. It is a miss of the store and of every
// tier, as a Get that finds nothing is. A front end calls it at most once
// per read, and never for a read whose Get it made.
func (h *Hierarchy) Missed() {
	h.misses.Add(1)
	for level := range h.tiers {
		h.counters[level].skipped.Add(1)
	}
}

// SharedTier is implemented by tiers that other nodes write too (the S3
// tier with a namespace shared across clusters): a key the hierarchy's index
// does not know may still be there.
type SharedTier interface {
	Shared() bool
}

func isShared(t Tier) bool {
	st, ok := t.(SharedTier)
	return ok && st.Shared()
}

// discover looks for key in the shared tiers after an index miss, and
// records a copy it finds so the read goes on as for any indexed block.
// Stat is a lookup in the tier's memory, so a miss costs no I/O.
func (h *Hierarchy) discover(key block.Key) bool {
	found := false
	for level, t := range h.tiers {
		if isShared(t) {
			if _, err := t.Stat(key); err == nil {
				h.indexCopy(key, level)
				found = true
			}
		}
	}
	return found
}
