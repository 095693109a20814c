package router

import (
	"sync"
	"sync/atomic"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/internal/keytable"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/scheduler"
)

// engine is the router's live view of one engine. The blocks an engine
// holds live here, under a lock of the engine's own, and not in the
// scheduler: sixteen event streams and the request path then never queue
// behind one mutex, and a decision matches its prompt against each engine
// under that engine's lock for a moment, passing the prefix lengths to
// Algorithm 1 (scheduler.Request.Held).
type engine struct {
	Engine
	role  scheduler.Role
	stats *kvevents.Stats
	sub   *kvevents.Subscriber
	// nblocks mirrors len(mu.blocks), for status without the lock.
	nblocks atomic.Int64

	mu struct {
		sync.Mutex
		// blocks are the blocks the router counts the engine as holding:
		// those its events report, and those the router placed prompts
		// for, not yet confirmed (speculative), each in one entry so a
		// match costs one lookup per key and a renewal none more.
		blocks *keytable.Table[held]
		// specs counts the entries with a speculative expiry.
		specs int
		// up is false while the engine is out of the scheduler after a
		// failure.
		up bool
	}
}

// held is what the router knows of one block on one engine.
type held struct {
	// tiers hold it by the engine's events; zero when only speculative.
	tiers index.TierMask
	// spec is when a speculative entry expires, in Unix nanoseconds; zero
	// when there is none. An entry past it counts as absent until the
	// next sweep removes it.
	spec int64
}

func (h held) live(now int64) bool { return h.tiers != 0 || h.spec > now }

func newEngine(cfg Engine, role scheduler.Role) *engine {
	e := &engine{Engine: cfg, role: role, stats: new(kvevents.Stats)}
	e.mu.blocks = keytable.New[held]()
	e.mu.up = true
	return e
}

// engineSink applies one engine's KV events to the router's view.
type engineSink struct {
	r *Router
	e *engine
}

var _ kvevents.Sink = engineSink{}

// Apply implements kvevents.Sink. Events overrule speculative entries: a
// stored block is confirmed, a removed one is gone whatever the router
// guessed.
func (s engineSink) Apply(u kvevents.Update) {
	e := s.e
	unspec := 0
	e.mu.Lock()
	bs := e.mu.blocks
	if u.Reset {
		bs.Filter(func(h *held) bool {
			h.tiers = 0
			return h.spec != 0
		})
	}
	for i := range u.Changes {
		c := &u.Changes[i]
		if c.Tiers == 0 {
			if h := bs.Find(&c.Key); h != nil {
				if h.spec != 0 {
					unspec++
				}
				bs.Remove(&c.Key)
			}
			continue
		}
		h, _ := bs.Upsert(&c.Key)
		if h.spec != 0 {
			unspec++
		}
		*h = held{tiers: c.Tiers}
	}
	e.mu.specs -= unspec
	e.nblocks.Store(int64(bs.Len()))
	e.mu.Unlock()
	if unspec > 0 {
		s.r.specCount.Add(-int64(unspec))
	}
}

// prefix returns how many leading keys the engine holds at now, and false
// when the engine is down.
func (e *engine) prefix(keys []block.Key, now int64) (int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.mu.up {
		return 0, false
	}
	bs := e.mu.blocks
	n := 0
	for n < len(keys) {
		if h := bs.Find(&keys[n]); h == nil || !h.live(now) {
			break
		}
		n++
	}
	return n, true
}

// match appends to out each up prefill engine's cached prefix of keys at
// now, where it is not empty.
func (r *Router) match(keys []block.Key, now int64, out []scheduler.HeldPrefix) []scheduler.HeldPrefix {
	if len(keys) == 0 {
		return out
	}
	for _, e := range r.order {
		if e.role == scheduler.RoleDecode {
			continue
		}
		if n, up := e.prefix(keys, now); up && n > 0 {
			out = append(out, scheduler.HeldPrefix{Instance: e.ID, Blocks: n})
		}
	}
	return out
}

// speculate counts keys as held by engine id until the TTL passes, unless
// its events confirm or drop them first. It is one entry per block in the
// engine's table, which its matches read anyway, renewed in place by a
// later decision for the same prefix; nothing is queued for expiry, since
// an expired entry counts as absent until a sweep removes it.
func (r *Router) speculate(id string, keys []block.Key, now int64) {
	e := r.engines[id]
	if e == nil || len(keys) == 0 {
		return
	}
	exp := now + int64(r.opts.SpeculativeTTL)
	// The bound is checked once per decision: concurrent decisions may
	// pass it by a prompt's blocks each.
	room := int64(r.opts.MaxSpeculative) - r.specCount.Load()
	added := int64(0)
	dropped := false
	e.mu.Lock()
	if !e.mu.up {
		e.mu.Unlock()
		return
	}
	bs := e.mu.blocks
	for i := range keys {
		h, isNew := bs.Upsert(&keys[i])
		if isNew {
			if added >= room {
				bs.Remove(&keys[i])
				dropped = true
				break
			}
			added++
		} else if h.tiers != 0 {
			continue // confirmed
		}
		// An entry without tiers is speculative: this renews it.
		h.spec = exp
	}
	e.mu.specs += int(added)
	e.nblocks.Store(int64(bs.Len()))
	e.mu.Unlock()
	if added > 0 {
		r.specCount.Add(added)
	}
	if dropped {
		r.m.specDropped.Inc()
	}
}

// sweepChunk bounds the slots a sweep looks at per hold of an engine's
// lock: a table of a million blocks takes milliseconds to pass over, and
// every decision matches against every engine.
const sweepChunk = 4096

// expire removes speculative entries past their TTL that events never
// confirmed. Matches already ignore them; this frees their memory and
// their share of MaxSpeculative.
func (r *Router) expire(now int64) {
	for _, e := range r.order {
		gone := 0
		sweep := func(h *held) bool {
			if h.spec == 0 || h.spec > now {
				return true
			}
			gone++
			h.spec = 0
			return h.tiers != 0
		}
		for next := 0; ; {
			e.mu.Lock()
			if e.mu.specs == 0 {
				e.mu.Unlock()
				break
			}
			before := gone
			next = e.mu.blocks.FilterSome(next, sweepChunk, sweep)
			e.mu.specs -= gone - before
			e.nblocks.Store(int64(e.mu.blocks.Len()))
			e.mu.Unlock()
			if next == 0 {
				break
			}
		}
		if gone > 0 {
			r.specCount.Add(-int64(gone))
		}
	}
}

// blocks counts the blocks the router holds for engine id, for the
// scheduler's status (scheduler.DriverOptions.Blocks).
func (r *Router) blocks(id string) (int64, bool) {
	if e := r.engines[id]; e != nil && e.role != scheduler.RoleDecode {
		return e.nblocks.Load(), true
	}
	return 0, false
}

// markDown takes a failed engine out of the scheduler until a probe finds
// it answering again. Its events still apply meanwhile: the view is
// current when it comes back.
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

// markUp brings an engine back.
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
}
