package tier

import (
	"context"
	"sync/atomic"

	"github.com/yuebing/yuebing/block"
)

// RemoteLevel is the level Get and Fetch report for a block that came from
// another node through the RemoteReader rather than from a local tier.
const RemoteLevel = -1

// RemoteReader fetches blocks that no local tier holds: in a cluster, from
// the nodes that do. A Hierarchy consults it on a local miss (SetRemote), so
// every front end reading through Get serves blocks held elsewhere without
// knowing about the cluster.
type RemoteReader interface {
	// ReadRemote returns a pinned view of key's block, verified against its
	// checksum, and where it came from. It returns an error wrapping
	// ErrNotFound when no node holds the block. The implementation may also
	// store the block locally (admission); the handle is valid either way
	// and must be released by the caller.
	ReadRemote(ctx context.Context, key block.Key) (*Handle, Origin, error)
}

// Origin says where a block read came from.
type Origin struct {
	// Level is the local tier (0 = fastest), or RemoteLevel.
	Level int
	// Source names the node a remote block came from ("" for a local one).
	Source string
	// Info is the block's metadata as its source recorded it (size,
	// checksum, Meta). It is filled in for remote blocks only: for local
	// ones Stat has it.
	Info BlockInfo
}

// hooks are the hierarchy's listeners, each a copy-on-write slice so firing
// one costs an atomic load and no lock.
type hooks struct {
	change atomic.Pointer[[]func(block.Key, int, bool)]
	access atomic.Pointer[[]func(block.Key, int)]
	drop   atomic.Pointer[[]func(block.Key)]
	remote atomic.Pointer[RemoteReader]
}

func addHook[F any](p *atomic.Pointer[[]F], fn F) {
	for {
		old := p.Load()
		var fns []F
		if old != nil {
			fns = append(fns, *old...)
		}
		fns = append(fns, fn)
		if p.CompareAndSwap(old, &fns) {
			return
		}
	}
}

// OnChange registers fn to be called whenever a block's presence in a tier
// changes: added true when tier level gained a copy (a put or a writer's
// commit, a demotion's landing, a promotion, a flush), false when it lost
// one (eviction, demotion away, corruption, Delete). Pin calls it with
// added true for the block's fastest tier, so listeners that keep a
// block's pin re-read it. fn runs on the goroutine that made the change,
// after the index changed and without the index's locks, but possibly under
// the key's stripe lock: it must be quick and must not call back into the
// hierarchy. Events of one key may arrive out of order with respect to each
// other when a demotion races a delete; a listener that needs the exact
// state reads it back (Lookup) rather than replaying events.
func (h *Hierarchy) OnChange(fn func(key block.Key, level int, added bool)) {
	addHook(&h.hooks.change, fn)
}

// OnDrop registers fn to be called with the key of every block that leaves
// the store other than by Delete: evicted from the last tier that held it,
// or dropped as corrupt. fn runs on the goroutine that evicted (often a
// put's) without the hierarchy's locks; it may call Delete on other keys
// but must not block for long.
func (h *Hierarchy) OnDrop(fn func(key block.Key)) {
	addHook(&h.hooks.drop, fn)
}

// OnAccess registers fn to be called with the key and size of every
// successful Get or Fetch, local or remote: the input of hot-block tracking.
// fn runs on the reader's goroutine and must be quick.
func (h *Hierarchy) OnAccess(fn func(key block.Key, size int)) {
	addHook(&h.hooks.access, fn)
}

// SetRemote makes Get and Fetch consult r when no local tier has a block.
// A nil r turns remote reads off.
func (h *Hierarchy) SetRemote(r RemoteReader) {
	if r == nil {
		h.hooks.remote.Store(nil)
		return
	}
	h.hooks.remote.Store(&r)
}

func (h *Hierarchy) changed(key block.Key, level int, added bool) {
	if h.closed.Load() {
		return
	}
	if fns := h.hooks.change.Load(); fns != nil {
		for _, fn := range *fns {
			fn(key, level, added)
		}
	}
}

// Accessed tells the access listeners of a read that did not go through
// the hierarchy: a block relayed from another node without a copy here.
func (h *Hierarchy) Accessed(key block.Key, size int) { h.accessed(key, size) }

func (h *Hierarchy) accessed(key block.Key, size int) {
	if fns := h.hooks.access.Load(); fns != nil {
		for _, fn := range *fns {
			fn(key, size)
		}
	}
}
