package router

import (
	"sync"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/scheduler"
)

// engine is the router's live view of one engine. Each engine has a lock
// of its own: sixteen event streams and the request path must not queue
// behind one mutex. The lock is held across the matching scheduler update,
// so the scheduler sees an engine's changes in the order they were made;
// it is never held with Router.specMu.
type engine struct {
	Engine
	role  scheduler.Role
	stats *kvevents.Stats
	sub   *kvevents.Subscriber

	mu struct {
		sync.Mutex
		// confirmed are the blocks its events say it holds.
		confirmed map[block.Key]index.TierMask
		// spec are blocks the router placed prompts for, not yet
		// confirmed, with their expiry: the engine holds them once the
		// prefill runs, and counting them at once stops a burst of one
		// prefix from scattering.
		spec map[block.Key]time.Time
		// up is false while the engine is out of the scheduler after a
		// failure.
		up bool
	}
}

func newEngine(cfg Engine, role scheduler.Role) *engine {
	e := &engine{Engine: cfg, role: role, stats: new(kvevents.Stats)}
	e.mu.confirmed = make(map[block.Key]index.TierMask)
	e.mu.spec = make(map[block.Key]time.Time)
	e.mu.up = true
	return e
}

// specEntry is a speculative block in expiry order.
type specEntry struct {
	e      *engine
	key    block.Key
	expiry time.Time
}

// engineSink applies one engine's KV events to the router's view.
type engineSink struct {
	r *Router
	e *engine
}

var _ kvevents.Sink = engineSink{}

// Apply implements kvevents.Sink.
func (s engineSink) Apply(u kvevents.Update) {
	r, e := s.r, s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if u.Reset {
		clear(e.mu.confirmed)
	}
	var add, rem []block.Key
	for _, c := range u.Changes {
		if c.Tiers != 0 {
			e.mu.confirmed[c.Key] = c.Tiers
			add = append(add, c.Key)
			continue
		}
		delete(e.mu.confirmed, c.Key)
		if _, ok := e.mu.spec[c.Key]; ok {
			// The engine evicted it: the events overrule the guess.
			delete(e.mu.spec, c.Key)
			r.specCount.Add(-1)
		}
		rem = append(rem, c.Key)
	}
	if !e.mu.up || e.role == scheduler.RoleDecode {
		return
	}
	var err error
	if u.Reset {
		err = r.d.UpdateBlocks(e.ID, scheduler.BlockUpdate{Reset: true, Added: e.heldLocked()})
	} else {
		err = r.d.UpdateBlocks(e.ID, scheduler.BlockUpdate{Added: add, Removed: rem})
	}
	if err != nil {
		panic("BUG: router: a registered engine refused a block update: " + err.Error())
	}
}

// heldLocked returns every block the router counts the engine as holding.
func (e *engine) heldLocked() []block.Key {
	keys := make([]block.Key, 0, len(e.mu.confirmed)+len(e.mu.spec))
	for k := range e.mu.confirmed {
		keys = append(keys, k)
	}
	for k := range e.mu.spec {
		if _, ok := e.mu.confirmed[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// speculate counts keys as held by the engine until ttl passes, unless its
// events confirm them first.
func (r *Router) speculate(id string, keys []block.Key, now time.Time) {
	e := r.engines[id]
	if e == nil {
		return
	}
	exp := now.Add(r.opts.SpeculativeTTL)
	limit := int64(r.opts.MaxSpeculative)
	queued := make([]specEntry, 0, len(keys))
	e.mu.Lock()
	if !e.mu.up {
		e.mu.Unlock()
		return
	}
	var add []block.Key
	for _, k := range keys {
		if _, ok := e.mu.confirmed[k]; ok {
			continue
		}
		if _, ok := e.mu.spec[k]; !ok {
			if r.specCount.Add(1) > limit {
				r.specCount.Add(-1)
				r.m.specDropped.Inc()
				break
			}
			add = append(add, k)
		} else if r.specQLen.Load() >= 2*limit {
			continue // keep the old expiry rather than grow the queue
		}
		e.mu.spec[k] = exp
		queued = append(queued, specEntry{e: e, key: k, expiry: exp})
	}
	if len(add) > 0 {
		if err := r.d.UpdateBlocks(id, scheduler.BlockUpdate{Added: add}); err != nil {
			panic("BUG: router: a registered engine refused a block update: " + err.Error())
		}
	}
	e.mu.Unlock()
	if len(queued) > 0 {
		r.specMu.Lock()
		r.specQ = append(r.specQ, queued...)
		r.specQLen.Store(int64(len(r.specQ)))
		r.specMu.Unlock()
	}
}

// expire drops speculative entries past their TTL that events never
// confirmed.
func (r *Router) expire(now time.Time) {
	r.specMu.Lock()
	i := 0
	for i < len(r.specQ) && !r.specQ[i].expiry.After(now) {
		i++
	}
	due := make([]specEntry, i)
	copy(due, r.specQ[:i])
	clear(r.specQ[:i])
	r.specQ = r.specQ[i:]
	r.specQLen.Store(int64(len(r.specQ)))
	r.specMu.Unlock()

	byEngine := map[*engine][]specEntry{}
	for _, s := range due {
		byEngine[s.e] = append(byEngine[s.e], s)
	}
	for e, due := range byEngine {
		e.mu.Lock()
		var rem []block.Key
		for _, s := range due {
			exp, ok := e.mu.spec[s.key]
			if !ok || exp.After(now) {
				continue // confirmed, evicted, or renewed by a later decision
			}
			delete(e.mu.spec, s.key)
			r.specCount.Add(-1)
			if _, held := e.mu.confirmed[s.key]; !held {
				rem = append(rem, s.key)
			}
		}
		if len(rem) > 0 && e.mu.up {
			if err := r.d.UpdateBlocks(e.ID, scheduler.BlockUpdate{Removed: rem}); err != nil {
				panic("BUG: router: a registered engine refused a block update: " + err.Error())
			}
		}
		e.mu.Unlock()
	}
}

// markDown takes a failed engine out of the scheduler until a probe finds
// it answering again.
func (r *Router) markDown(id string, why error) {
	e := r.engines[id]
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.mu.up {
		return
	}
	e.mu.up = false
	r.m.engineDown.WithLabelValues(id).Inc()
	r.log.Warn("router: engine down", "engine", id, "err", why)
	if err := r.d.RemoveInstance(id); err != nil {
		panic("BUG: router: removing a registered engine: " + err.Error())
	}
}

// markUp brings an engine back with everything it is known to hold.
func (r *Router) markUp(id string) {
	e := r.engines[id]
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.up {
		return
	}
	if err := r.d.AddInstance(scheduler.Instance{ID: e.ID, Addr: e.URL, Role: e.role}); err != nil {
		panic("BUG: router: re-adding an engine: " + err.Error())
	}
	e.mu.up = true
	r.log.Info("router: engine up", "engine", id)
	if e.role == scheduler.RoleDecode {
		return
	}
	if err := r.d.UpdateBlocks(e.ID, scheduler.BlockUpdate{Reset: true, Added: e.heldLocked()}); err != nil {
		panic("BUG: router: a registered engine refused a block update: " + err.Error())
	}
}
