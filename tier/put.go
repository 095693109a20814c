package tier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// PutResult says what a put did.
type PutResult struct {
	// Created is false when the block was already stored (and not
	// rewritten).
	Created bool
	// Tier names the tier that holds the block.
	Tier string
}

// Put stores value under key in the fastest tier that has room (or can make
// it). A key already stored is not rewritten: the result says Created false.
func (h *Hierarchy) Put(ctx context.Context, key block.Key, value []byte, opts PutOptions) (PutResult, error) {
	sum := func() uint32 {
		if opts.HasChecksum {
			return opts.Checksum
		}
		return block.Checksum(value)
	}
	return h.put(ctx, key, int64(len(value)), opts, func(t Tier) error { return t.Put(ctx, key, value, opts) }, sum)
}

// Create reserves room for a block of size bytes in the fastest tier that
// has it and returns a Writer; the block becomes visible, and indexed, on
// Commit. A key already stored returns ErrExists.
func (h *Hierarchy) Create(ctx context.Context, key block.Key, size int64, opts PutOptions) (Writer, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	if e, ok := h.ix.Get(key); ok && e.Tiers != 0 {
		return nil, ErrExists
	}
	h.noteParent(opts)
	var last error
	for level, t := range h.tiers {
		w, err := t.Create(ctx, key, size, opts)
		switch {
		case err == nil:
			return &hierWriter{Writer: w, h: h, key: key, level: level, size: size, opts: opts}, nil
		case errors.Is(err, ErrExists):
			return nil, err
		case errors.Is(err, ErrTooLarge), errors.Is(err, ErrNoSpace), errors.Is(err, ErrUnavailable):
			last = err
			continue
		default:
			return nil, err
		}
	}
	return nil, last
}

// hierWriter indexes the block when the tier's writer commits.
type hierWriter struct {
	Writer
	h     *Hierarchy
	key   block.Key
	level int
	size  int64
	opts  PutOptions
}

// Commit makes the tier's copy durable (an SSD writer's write and sync)
// without the key's stripe lock, then indexes it under the lock.
func (w *hierWriter) Commit(ctx context.Context) error {
	if err := w.Writer.Commit(ctx); err != nil {
		return err
	}
	w.h.indexCopy(w.key, w.level)
	if w.opts.HasParent {
		// The HTTP API streams its puts in through Create: without this
		// the admission policy would never see a server's chains.
		w.h.notePut(w.key, w.opts)
	}
	return nil
}

// put writes the block to the fastest tier that takes it. The write (for
// the SSD tier: the record and its sync) runs without the key's stripe lock,
// so a slow disk delays only this key, not the other keys of its stripe;
// the lock covers only the index update (indexCopy). Puts of the same key
// still run one at a time (startPut): a second waits for the first and then
// finds the block stored.
func (h *Hierarchy) put(ctx context.Context, key block.Key, size int64, opts PutOptions, put func(Tier) error, sum func() uint32) (PutResult, error) {
	if h.closed.Load() {
		return PutResult{}, ErrClosed
	}
	done, err := h.startPut(ctx, key)
	if err != nil {
		return PutResult{}, err
	}
	defer done()
	if e, ok := h.ix.Get(key); ok && e.Tiers != 0 {
		return PutResult{Created: false, Tier: h.tiers[e.Tiers.Top()].Name()}, nil
	}
	h.noteParent(opts)
	var last error
	for level, t := range h.tiers {
		err := put(t)
		if errors.Is(err, ErrExists) && !isShared(t) && !holdsCopy(t, key, size, sum) {
			// The block is not stored (the index has no copy), so this
			// copy of other bytes is a deleted block's, left by a demotion
			// cancelled in flight and not yet undone: it must not stand
			// for the new block.
			_ = t.Delete(key)
			err = put(t)
			if errors.Is(err, ErrExists) && !holdsCopy(t, key, size, sum) {
				err = fmt.Errorf("%w: a deleted copy of %v is still being removed from %s", ErrUnavailable, key, t.Name())
			}
		}
		switch {
		case err == nil, errors.Is(err, ErrExists):
			// If the copy is gone again before it could be indexed
			// (evicted, or deleted meanwhile), the put still succeeded:
			// the store simply let the block go.
			h.indexCopy(key, level)
			h.notePut(key, opts)
			return PutResult{Created: err == nil, Tier: t.Name()}, nil
		case errors.Is(err, ErrTooLarge), errors.Is(err, ErrNoSpace), errors.Is(err, ErrUnavailable):
			last = err
		default:
			return PutResult{}, err
		}
	}
	return PutResult{}, last
}

// startPut waits until no other put of key is in progress and marks one;
// done ends it. Only puts of the same key wait for each other.
func (h *Hierarchy) startPut(ctx context.Context, key block.Key) (done func(), err error) {
	p := &h.putting[key[0]]
	for {
		p.Lock()
		ch, busy := p.m[key]
		if !busy {
			ch = make(chan struct{})
			p.m[key] = ch
			p.Unlock()
			return func() {
				p.Lock()
				delete(p.m, key)
				p.Unlock()
				close(ch)
			}, nil
		}
		p.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Delete removes the block from every tier. It returns ErrNotFound if no
// tier held it.
func (h *Hierarchy) Delete(key block.Key) error {
	if h.closed.Load() {
		return ErrClosed
	}
	mu := h.lock(key)
	mu.Lock()
	defer mu.Unlock()
	// The index entry is the block's existence: removing it, together with
	// cancelling a demotion in flight, is the moment of deletion. A
	// demotion only commits, or even starts, while the entry exists.
	h.inflight.Lock()
	if d := h.inflight.m[key]; d != nil {
		d.cancelled = true // the worker deletes whatever it wrote
	}
	before, _ := h.ix.Get(key)
	found := h.ix.Delete(key)
	h.inflight.Unlock()
	for level := range h.tiers {
		if before.Tiers.Has(level) {
			h.changed(key, level, false)
		}
	}
	for _, t := range h.tiers {
		switch err := t.Delete(key); {
		case err == nil:
			found = true
		case errors.Is(err, ErrNotFound):
		default:
			return err
		}
	}
	if !found {
		return ErrNotFound
	}
	return nil
}

// Pin soft-pins the block until the given time in every tier holding it
// (a zero time unpins). It fails with ErrNoSpace if no tier could take the
// pin within its pinned-bytes limit.
func (h *Hierarchy) Pin(key block.Key, until time.Time) error {
	if h.closed.Load() {
		return ErrClosed
	}
	mu := h.lock(key)
	mu.Lock()
	defer mu.Unlock()
	e, ok := h.ix.Get(key)
	if !ok || e.Tiers == 0 {
		return ErrNotFound
	}
	// The index records the pin first: a demotion in flight reads it after
	// writing its copy and pins that copy too.
	prev := e.PinnedUntil
	h.ix.Update(key, func(e index.Entry, ok bool) (index.Entry, bool) {
		e.PinnedUntil = unixSeconds(until)
		return e, ok
	})
	pinned := false
	var last error
	for level, t := range h.tiers {
		if !e.Tiers.Has(level) {
			continue
		}
		switch err := t.Pin(key, until); {
		case err == nil:
			pinned = true
		case errors.Is(err, ErrNotFound):
			// In flight to the next tier; the demotion applies the pin.
			pinned = pinned || h.inflightHandleExists(key)
		default:
			last = err
		}
	}
	if !pinned && !until.IsZero() {
		h.ix.Update(key, func(e index.Entry, ok bool) (index.Entry, bool) {
			e.PinnedUntil = prev
			return e, ok
		})
		if last == nil {
			last = ErrNotFound
		}
		return last
	}
	h.changed(key, e.Tiers.Top(), true)
	return nil
}
