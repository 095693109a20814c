package router

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
	// blockSize is the size of the engine's blocks: Options.BlockSize
	// until its events state another (kvevents.Update.BlockSize).
	blockSize atomic.Int64

	mu struct {
		sync.Mutex
		// blocks are the blocks the router counts the engine as holding:
		// those its events report, and those the router placed prompts
		// for, not yet confirmed (speculative), each in one entry so a
		// match costs one lookup per key and a renewal none more.
		blocks *keytable.Table[held]
		// specs counts the entries with a speculative expiry.
		specs int
		// healthy is the probes' verdict: false from a failed probe (or
		// a refused connection) until one answers.
		healthy bool
		// registered is the operator's: false from a DELETE of the engine
		// on the conductor API until it is POSTed again.
		registered bool
		// capacity is the last registration's, kept for re-adding.
		capacity int64
		// since is when the engine's state (State) last changed.
		since time.Time
	}
	// probeFailed counts the engine's unanswered probes in a row; only
	// the one probe in flight (Router.probe) touches it.
	probeFailed atomic.Int32
}

// scheduledLocked reports whether the scheduler places requests on e:
// exactly when it is healthy and registered.
func (e *engine) scheduledLocked() bool { return e.mu.healthy && e.mu.registered }

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

func newEngine(cfg Engine, role scheduler.Role, blockSize int) *engine {
	e := &engine{Engine: cfg, role: role, stats: new(kvevents.Stats)}
	e.blockSize.Store(int64(blockSize))
	e.mu.blocks = keytable.New[held]()
	e.mu.healthy, e.mu.registered = true, true
	e.mu.since = time.Now()
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
	if u.BlockSize > 0 {
		e.blockSize.Store(int64(u.BlockSize))
	}
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
	if !e.scheduledLocked() {
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

// keySizes is a prompt's keys at the router's block size, and at the
// other sizes its engines' events state, each chained once per decision
// when an engine of that size is matched.
type keySizes struct {
	base   int
	keys   []block.Key
	ns     string
	tokens []uint32
	// other holds keys at sizes other than base; engines rarely differ,
	// so a short list.
	other []sizedKeys
}

type sizedKeys struct {
	size int
	keys []block.Key
}

// at returns the prompt's keys at block size bs.
func (k *keySizes) at(bs int) []block.Key {
	if bs == k.base || bs <= 0 {
		return k.keys
	}
	for _, o := range k.other {
		if o.size == bs {
			return o.keys
		}
	}
	// The size came from a validated event and the namespace keyed the
	// base keys already: chaining cannot fail.
	keys, err := block.ChainKeys(k.ns, bs, k.tokens)
	if err != nil {
		panic("BUG: router: a prompt keyed at one block size does not key at another: " + err.Error())
	}
	k.other = append(k.other, sizedKeys{bs, keys})
	return keys
}

// baseBlocks converts a prefix of n blocks of size bs into whole blocks
// of the base size, at most the prompt's.
func (k *keySizes) baseBlocks(n, bs int) int {
	if bs == k.base || bs <= 0 {
		return n
	}
	return min(n*bs/k.base, len(k.keys))
}

// match appends to out each up prefill engine's cached prefix of the
// prompt at now, where it is not empty, in blocks of the router's size:
// each engine is matched with keys of its own block size.
func (r *Router) match(ks *keySizes, now int64, out []scheduler.HeldPrefix) []scheduler.HeldPrefix {
	if len(ks.keys) == 0 {
		return out
	}
	for _, e := range r.order {
		if e.role == scheduler.RoleDecode {
			continue
		}
		bs := int(e.blockSize.Load())
		if n, up := e.prefix(ks.at(bs), now); up && n > 0 {
			if n = ks.baseBlocks(n, bs); n > 0 {
				out = append(out, scheduler.HeldPrefix{Instance: e.ID, Blocks: n})
			}
		}
	}
	return out
}

// speculate counts keys as held by engine id until the TTL passes, unless
// its events confirm or drop them first. It is one entry per block in the
// engine's table, which its matches read anyway, renewed in place by a
// later decision for the same prefix; nothing is queued for expiry, since
// an expired entry counts as absent until a sweep removes it.
func (r *Router) speculate(id string, ks *keySizes, now int64) {
	e := r.engines[id]
	if e == nil {
		return
	}
	keys := ks.at(int(e.blockSize.Load()))
	if len(keys) == 0 {
		return
	}
	exp := now + int64(r.opts.SpeculativeTTL)
	// The bound is checked once per decision: concurrent decisions may
	// pass it by a prompt's blocks each.
	room := int64(r.opts.MaxSpeculative) - r.specCount.Load()
	added := int64(0)
	dropped := false
	e.mu.Lock()
	if !e.scheduledLocked() {
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

// An engine's state is two flags under its lock, the probes' health and
// the operator's registration, and it is in the scheduler exactly when
// both are set. Every change of either goes through setLocked, so the probe
// loop, failed requests and the conductor API (Register, Deregister) cannot
// leave the router and the scheduler disagreeing about an engine: what one
// of them does, the others see.

// setLocked moves e to the given flags and makes the scheduler agree. An
// error leaves e as it was: a pool store instance can have taken the id
// while the engine was out (its id comes from a pool node's answer).
func (r *Router) setLocked(e *engine, healthy, registered bool) error {
	was, now := e.scheduledLocked(), healthy && registered
	switch {
	case now && !was:
		in := scheduler.Instance{ID: e.ID, Addr: e.URL, Role: e.role, Capacity: e.mu.capacity}
		if err := r.d.AddInstance(in); err != nil {
			return err
		}
	case was && !now:
		// Only the router registers its engines; an unknown id is out
		// already, which is what was asked.
		if err := r.d.RemoveInstance(e.ID); err != nil && !errors.Is(err, scheduler.ErrUnknownInstance) {
			return err
		}
	}
	before := e.stateLocked()
	e.mu.healthy, e.mu.registered = healthy, registered
	if e.stateLocked() != before {
		e.mu.since = time.Now()
	}
	if !healthy {
		r.dropViewLocked(e)
	}
	return nil
}

// Engine states, as Status reports them.
const (
	// StateUp engines are scheduled.
	StateUp = "up"
	// StateDown engines fail their probes; they are out until one answers.
	StateDown = "down"
	// StateDraining engines were deregistered (the conductor API's
	// DELETE): they take no new requests and finish what they have.
	StateDraining = "draining"
)

// stateLocked returns e's state: down when its probes fail, else
// draining when deregistered, else up.
func (e *engine) stateLocked() string {
	switch {
	case !e.mu.healthy:
		return StateDown
	case !e.mu.registered:
		return StateDraining
	}
	return StateUp
}

// dropViewLocked forgets every block e was counted as holding: an engine
// that went down may have lost them all (a restarted engine starts
// empty), so it comes back with what its events report from then on
// (after a restart, its replay), never the old view.
func (r *Router) dropViewLocked(e *engine) {
	specs := e.mu.specs
	e.mu.blocks = keytable.New[held]()
	e.mu.specs = 0
	e.nblocks.Store(0)
	if specs > 0 {
		r.specCount.Add(-int64(specs))
	}
}

// markDown records a failed probe's verdict: the engine leaves the
// scheduler until a probe finds it answering again, and its view is
// dropped (dropViewLocked): what its events report from then on is what it
// comes back with.
func (r *Router) markDown(id string, why error) {
	e := r.engines[id]
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.mu.healthy {
		return
	}
	if err := r.setLocked(e, false, e.mu.registered); err != nil {
		r.log.Error("router: cannot take an engine out", "engine", id, "err", err)
		return
	}
	r.m.engineDown.WithLabelValues(id).Inc()
	r.log.Warn("router: engine down", "engine", id, "err", why)
}

// markUp records an answered probe: a healthy engine that is registered
// rejoins the scheduler.
func (r *Router) markUp(id string) {
	e := r.engines[id]
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.healthy {
		return
	}
	if err := r.setLocked(e, true, e.mu.registered); err != nil {
		// The next answered probe tries again.
		r.log.Warn("router: engine answers but cannot rejoin the scheduler", "engine", id, "err", err)
		return
	}
	if e.sub != nil {
		// Its view was dropped when it went down: the next batch brings
		// its replay.
		e.sub.Resync()
	}
	r.log.Info("router: engine up", "engine", id)
}

// Register registers one of the router's engines with its scheduler again
// after Deregister, as the conductor API's POST /v1/conductor/instances
// does for a router. The router routes to the engines it was configured
// with only: any other id, or another address or role than the engine's,
// is an error wrapping scheduler.ErrInstance (an unknown engine has no
// address to forward to, nor events or probes). An engine registered
// already is scheduler.ErrDuplicate while it is scheduled and no error
// while its probes fail: it rejoins when one answers.
func (r *Router) Register(in scheduler.Instance) error {
	if err := in.Validate(); err != nil {
		return err
	}
	e := r.engines[in.ID]
	if e == nil {
		return fmt.Errorf("%w: %w: %q: the router routes to its configured engines only", scheduler.ErrInstance, ErrUnknownEngine, in.ID)
	}
	if in.Addr != "" && in.Addr != e.URL {
		return fmt.Errorf("%w: engine %q is at %s, not %s", scheduler.ErrInstance, e.ID, e.URL, in.Addr)
	}
	if in.Role != e.role {
		return fmt.Errorf("%w: engine %q has role %s, not %s", scheduler.ErrInstance, e.ID, e.role, in.Role)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.registered {
		if e.scheduledLocked() {
			return fmt.Errorf("%w: engine %q is registered", scheduler.ErrDuplicate, e.ID)
		}
		return nil
	}
	old := e.mu.capacity
	e.mu.capacity = in.Capacity
	if err := r.setLocked(e, e.mu.healthy, true); err != nil {
		e.mu.capacity = old
		return err
	}
	r.log.Info("router: engine registered", "engine", e.ID, "healthy", e.mu.healthy)
	return nil
}

// Deregister takes one of the router's engines out of its scheduler until
// Register, whatever its probes find, as the conductor API's DELETE
// /v1/conductor/instances/ID does for a router. An id that is not a
// registered engine is an error wrapping scheduler.ErrUnknownInstance.
func (r *Router) Deregister(id string) error {
	e := r.engines[id]
	if e == nil {
		return fmt.Errorf("%w: %w: %q", scheduler.ErrUnknownInstance, ErrUnknownEngine, id)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.mu.registered {
		return fmt.Errorf("%w: engine %q is not registered", scheduler.ErrUnknownInstance, id)
	}
	if err := r.setLocked(e, e.mu.healthy, false); err != nil {
		return err
	}
	r.log.Info("router: engine deregistered", "engine", id)
	return nil
}

// scheduled reports whether engine id is in the scheduler now: healthy
// and registered.
func (r *Router) scheduled(id string) bool {
	e := r.engines[id]
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.healthy && e.mu.registered
}
