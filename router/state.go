package router

import (
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/scheduler"
)

// engine is the router's live view of one engine. Fields below the line
// are guarded by Router.mu.
type engine struct {
	Engine
	role  scheduler.Role
	stats *kvevents.Stats
	sub   *kvevents.Subscriber

	// confirmed are the blocks its events say it holds.
	confirmed map[block.Key]index.TierMask
	// spec are blocks the router placed prompts for, not yet confirmed,
	// with their expiry: the engine holds them once the prefill runs, and
	// counting them at once stops a burst of one prefix from scattering.
	spec map[block.Key]time.Time
	// up is false while the engine is out of the scheduler after a failure.
	up bool
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
	r.mu.Lock()
	defer r.mu.Unlock()
	if u.Reset {
		clear(e.confirmed)
	}
	var add, rem []block.Key
	for _, c := range u.Changes {
		if c.Tiers != 0 {
			e.confirmed[c.Key] = c.Tiers
			add = append(add, c.Key)
			continue
		}
		delete(e.confirmed, c.Key)
		if _, ok := e.spec[c.Key]; ok {
			// The engine evicted it: the events overrule the guess.
			delete(e.spec, c.Key)
			r.specCount--
		}
		rem = append(rem, c.Key)
	}
	if !e.up || e.role == scheduler.RoleDecode {
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
	keys := make([]block.Key, 0, len(e.confirmed)+len(e.spec))
	for k := range e.confirmed {
		keys = append(keys, k)
	}
	for k := range e.spec {
		if _, ok := e.confirmed[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// speculate counts keys as held by the engine until ttl passes, unless its
// events confirm them first.
func (r *Router) speculate(id string, keys []block.Key, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.engines[id]
	if e == nil || !e.up {
		return
	}
	exp := now.Add(r.opts.SpeculativeTTL)
	var add []block.Key
	for _, k := range keys {
		if _, ok := e.confirmed[k]; ok {
			continue
		}
		if _, ok := e.spec[k]; !ok {
			if r.specCount >= r.opts.MaxSpeculative {
				r.m.specDropped.Inc()
				break
			}
			r.specCount++
			add = append(add, k)
		} else if len(r.specQ) >= 2*r.opts.MaxSpeculative {
			continue // keep the old expiry rather than grow the queue
		}
		e.spec[k] = exp
		r.specQ = append(r.specQ, specEntry{e: e, key: k, expiry: exp})
	}
	if len(add) > 0 {
		if err := r.d.UpdateBlocks(id, scheduler.BlockUpdate{Added: add}); err != nil {
			panic("BUG: router: a registered engine refused a block update: " + err.Error())
		}
	}
}

// expire drops speculative entries past their TTL that events never
// confirmed.
func (r *Router) expire(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rem := map[*engine][]block.Key{}
	i := 0
	for ; i < len(r.specQ) && !r.specQ[i].expiry.After(now); i++ {
		s := r.specQ[i]
		exp, ok := s.e.spec[s.key]
		if !ok || exp.After(now) {
			continue // confirmed, evicted, or renewed by a later decision
		}
		delete(s.e.spec, s.key)
		r.specCount--
		if _, held := s.e.confirmed[s.key]; !held {
			rem[s.e] = append(rem[s.e], s.key)
		}
	}
	clear(r.specQ[:i])
	r.specQ = r.specQ[i:]
	for e, keys := range rem {
		if !e.up {
			continue
		}
		if err := r.d.UpdateBlocks(e.ID, scheduler.BlockUpdate{Removed: keys}); err != nil {
			panic("BUG: router: a registered engine refused a block update: " + err.Error())
		}
	}
}

// markDown takes a failed engine out of the scheduler until a probe finds
// it answering again.
func (r *Router) markDown(id string, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.engines[id]
	if e == nil || !e.up {
		return
	}
	e.up = false
	r.m.engineDown.WithLabelValues(id).Inc()
	r.log.Warn("router: engine down", "engine", id, "err", why)
	if err := r.d.RemoveInstance(id); err != nil {
		panic("BUG: router: removing a registered engine: " + err.Error())
	}
}

// markUp brings an engine back with everything it is known to hold.
func (r *Router) markUp(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.engines[id]
	if e == nil || e.up {
		return
	}
	if err := r.d.AddInstance(scheduler.Instance{ID: e.ID, Addr: e.URL, Role: e.role}); err != nil {
		panic("BUG: router: re-adding an engine: " + err.Error())
	}
	e.up = true
	r.log.Info("router: engine up", "engine", id)
	if e.role == scheduler.RoleDecode {
		return
	}
	if err := r.d.UpdateBlocks(e.ID, scheduler.BlockUpdate{Reset: true, Added: e.heldLocked()}); err != nil {
		panic("BUG: router: a registered engine refused a block update: " + err.Error())
	}
}
