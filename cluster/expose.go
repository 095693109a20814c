package cluster

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// exposer serves this node's blocks to readers on other nodes. To expose a
// block it pins it (a zero-copy view of the DRAM arena, or a verified copy
// read from SSD) and registers exactly those bytes as a transfer segment of
// their own; the reader READs the segment and then releases it. A segment
// per block, rather than the whole arena as one, means a reader can reach
// nothing but the block it asked for, and the pin keeps the bytes from being
// evicted or reused while they are read. Exposures are bounded
// (MaxExposed) and lapse after ExposeTTL if the reader never releases them.
type exposer struct {
	n    *Node
	next atomic.Uint64
	mu   struct {
		sync.Mutex
		m map[uint64]*exposure
	}
}

type exposure struct {
	name     string
	h        *tier.Handle
	deadline time.Time
}

// exposeResponse tells the reader where the block is.
type exposeResponse struct {
	ID uint64 `json:"id"`
	// Segment is the transfer segment holding the block's bytes; empty for
	// an empty block.
	Segment  string `json:"segment"`
	Size     int64  `json:"size"`
	Checksum uint32 `json:"crc32c"`
	Meta     []byte `json:"meta,omitempty"`
	Tier     string `json:"tier"`
	// PinnedUntil is the block's soft pin, Unix seconds.
	PinnedUntil int64 `json:"pinned_until,omitempty"`
	// Data carries a block of at most inlineMax bytes in the answer
	// itself, with no segment: one round trip instead of a segment's
	// open, read, close and release.
	Data []byte `json:"data,omitempty"`
}

// inlineMax is the largest block an exposure answers inline. Redis keys'
// metadata and other small values would otherwise pay several round trips
// for a few bytes; past 64 KiB the transfer service's path is the cheaper.
const inlineMax = 64 << 10

func newExposer(n *Node) *exposer {
	e := &exposer{n: n}
	e.mu.m = make(map[uint64]*exposure)
	return e
}

func (e *exposer) expose(ctx context.Context, key block.Key) (exposeResponse, error) {
	e.mu.Lock()
	busy := len(e.mu.m) >= e.n.opts.MaxExposed
	e.mu.Unlock()
	if busy {
		return exposeResponse{}, fmt.Errorf("%w: %d blocks exposed", ErrBusy, e.n.opts.MaxExposed)
	}
	h, level, err := e.n.store.GetLocal(ctx, key)
	if err != nil {
		// The leader thought we held it: tell it what we do hold.
		e.n.rep.touch(key)
		return exposeResponse{}, err
	}
	resp := exposeResponse{ID: e.next.Add(1), Size: int64(h.Len()), Checksum: h.Checksum(), Tier: tierLevelName(e.n.store, level)}
	if info, _, err := e.n.store.Stat(key); err == nil {
		resp.Meta = info.Meta
		if !info.PinnedUntil.IsZero() {
			resp.PinnedUntil = info.PinnedUntil.Unix()
		}
	}
	if h.Len() <= inlineMax {
		if h.Len() > 0 {
			resp.Data = bytes.Clone(h.Bytes())
		}
		h.Release()
		e.n.stats.inlined.Add(1)
		return resp, nil
	}
	resp.Segment = "x/" + strconv.FormatUint(resp.ID, 10)
	if _, err := e.n.engine.Register(resp.Segment, "cpu:0", h.Bytes()); err != nil {
		h.Release()
		return exposeResponse{}, err
	}
	e.mu.Lock()
	e.mu.m[resp.ID] = &exposure{name: resp.Segment, h: h, deadline: time.Now().Add(e.n.opts.ExposeTTL)}
	e.mu.Unlock()
	e.n.stats.exposed.Add(1)
	return resp, nil
}

// release ends an exposure: the segment is withdrawn once no transfer uses
// it, then the pin goes. Unknown ids (released already, or lapsed) are fine.
func (e *exposer) release(ctx context.Context, id uint64) error {
	e.mu.Lock()
	x := e.mu.m[id]
	delete(e.mu.m, id)
	e.mu.Unlock()
	if x == nil {
		return nil
	}
	return e.finish(ctx, x)
}

func (e *exposer) finish(ctx context.Context, x *exposure) error {
	if err := e.n.engine.Unregister(ctx, x.name); err != nil {
		// A transfer still holds the memory: keep the pin rather than let
		// the bytes be reused under it. The engine's own request timeout
		// ends the transfer; the pin goes with the node at worst.
		e.n.log.Warn("cluster: exposed block still in use; keeping it pinned", "segment", x.name, "err", err)
		return err
	}
	x.h.Release()
	return nil
}

// reap releases exposures whose reader never came back.
func (e *exposer) reap() {
	t := time.NewTicker(max(e.n.opts.ExposeTTL/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.n.ctx.Done():
			return
		case now := <-t.C:
			var old []*exposure
			e.mu.Lock()
			for id, x := range e.mu.m {
				if now.After(x.deadline) {
					old = append(old, x)
					delete(e.mu.m, id)
				}
			}
			e.mu.Unlock()
			for _, x := range old {
				ctx, cancel := context.WithTimeout(e.n.ctx, e.n.opts.RequestTimeout)
				e.finish(ctx, x)
				cancel()
			}
		}
	}
}

// closeAll releases every exposure; the node is closing.
func (e *exposer) closeAll() {
	e.mu.Lock()
	all := e.mu.m
	e.mu.m = map[uint64]*exposure{}
	e.mu.Unlock()
	for _, x := range all {
		ctx, cancel := context.WithTimeout(context.Background(), e.n.opts.RequestTimeout)
		e.finish(ctx, x)
		cancel()
	}
}

func (e *exposer) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.mu.m)
}
