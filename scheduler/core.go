package scheduler

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// Core is the conductor's decision logic: instances, the blocks they hold,
// the work scheduled on them, and Algorithm 1. It is deterministic and does
// no I/O: every method takes the current time as now (a duration since an
// epoch of the caller's choosing, never decreasing) and returns decisions
// for the caller to carry out. A Core is not safe for concurrent use; the
// Driver wraps one with a mutex for the HTTP service, the simulator drives
// one directly.
type Core struct {
	opts     Options
	slots    [MaxInstances]*instance
	byID     map[string]*instance
	prefills instSet
	decodes  instSet
	stores   instSet
	holders  *holders
	flights  map[string]*flight
	rng      *rand.Rand
	rrLast   int // PolicyRoundRobin: slot of its last choice, -1 before the first
	// tieNext is where the cache-aware policies start their pass over the
	// prefill instances: the slot after their last choice, so of instances
	// with equal predicted TTFT (all idle, none holding the prefix) each
	// takes its turn rather than the first registered taking every one.
	tieNext int
	nextID  uint64
	lens    [MaxInstances]int // scratch for match
}

// NewCore returns an empty Core. opts are defaulted and validated.
func NewCore(opts Options) (*Core, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Core{
		opts:    opts,
		byID:    make(map[string]*instance),
		holders: newHolders(),
		flights: make(map[string]*flight),
		rng:     rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)),
		rrLast:  -1,
	}, nil
}

// Options returns the core's options, defaults filled in.
func (c *Core) Options() Options { return c.opts }

// AddInstance registers an instance. Its queue and batch start empty.
func (c *Core) AddInstance(in Instance, now time.Duration) error {
	if err := in.Validate(); err != nil {
		return err
	}
	if _, ok := c.byID[in.ID]; ok {
		return fmt.Errorf("%w: instance %q is already registered", ErrDuplicate, in.ID)
	}
	slot := -1
	for i, s := range c.slots {
		if s == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		return fmt.Errorf("%w: %d registered", ErrTooManyInstances, MaxInstances)
	}
	st := &instance{Instance: in, slot: slot, lastHeartbeat: now, baseAt: now}
	c.slots[slot] = st
	c.byID[in.ID] = st
	c.roleSet(in.Role).add(slot)
	return nil
}

func (c *Core) roleSet(r Role) *instSet {
	switch r {
	case RolePrefill:
		return &c.prefills
	case RoleDecode:
		return &c.decodes
	case RoleStore:
		return &c.stores
	}
	panic("BUG: scheduler: role " + r.String())
}

// RemoveInstance unregisters an instance and forgets its blocks. Requests
// in flight on it are forgotten too: the caller retries them.
func (c *Core) RemoveInstance(id string) error {
	in, ok := c.byID[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownInstance, id)
	}
	for fid, f := range c.flights {
		if f.prefill == in || f.decode == in {
			c.forget(fid, f)
		}
	}
	c.holders.drop(in.slot)
	c.roleSet(in.Role).remove(in.slot)
	c.slots[in.slot] = nil
	delete(c.byID, id)
	return nil
}

func (c *Core) instance(id string) (*instance, error) {
	in, ok := c.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownInstance, id)
	}
	return in, nil
}

// Heartbeat records an instance's own report of its load at now; see Load.
func (c *Core) Heartbeat(id string, l Load, now time.Duration) error {
	in, err := c.instance(id)
	if err != nil {
		return err
	}
	if l.QueueTime < 0 || l.Batch < 0 || l.KVTokens < 0 {
		return fmt.Errorf("%w: negative load %+v", ErrRequest, l)
	}
	in.lastHeartbeat = now
	switch in.Role {
	case RolePrefill:
		in.queueEnd = now + l.QueueTime
		// Requests whose prefill should have ended are in the report (or
		// in a decode batch); stop tracking those that have nowhere to go.
		for fid, f := range c.flights {
			if f.prefill == in && f.decode == nil && f.joinedBy(now) {
				c.forget(fid, f)
			}
		}
	case RoleDecode:
		in.baseBatch, in.baseKV, in.baseAt = l.Batch, l.KVTokens, now
		// Members that joined the batch by now are counted in the report.
		for i := 0; i < len(in.members); {
			if f := in.members[i]; f.joinedBy(now) {
				c.forget(f.id, f)
				continue // forget swapped another member into i
			}
			i++
		}
	}
	return nil
}

// BlockUpdate changes the set of blocks an instance holds.
type BlockUpdate struct {
	// Reset drops every block the instance held before Added is applied:
	// the full state an instance resends when it (re)connects.
	Reset bool
	// Added blocks are held from now on, in Tiers (zero means tier 0).
	Added []block.Key
	Tiers index.TierMask
	// Removed blocks were evicted.
	Removed []block.Key
}

// UpdateBlocks applies u to instance id's block set.
func (c *Core) UpdateBlocks(id string, u BlockUpdate) error {
	in, err := c.instance(id)
	if err != nil {
		return err
	}
	if in.Role == RoleDecode {
		return fmt.Errorf("%w: %q is a decode instance; only prefill and store instances hold blocks for reuse", ErrRequest, id)
	}
	if u.Reset {
		c.holders.drop(in.slot)
	}
	for _, k := range u.Removed {
		c.holders.remove(in.slot, k)
	}
	for _, k := range u.Added {
		c.holders.add(in.slot, k, u.Tiers)
	}
	return nil
}

// AddBlock and RemoveBlock are UpdateBlocks for one key, without building
// a BlockUpdate: the simulator reports every insertion and eviction.
func (c *Core) AddBlock(id string, k block.Key) error {
	in, err := c.instance(id)
	if err != nil {
		return err
	}
	c.holders.add(in.slot, k, 0)
	return nil
}

// RemoveBlock: see AddBlock.
func (c *Core) RemoveBlock(id string, k block.Key) error {
	in, err := c.instance(id)
	if err != nil {
		return err
	}
	c.holders.remove(in.slot, k)
	return nil
}

// PrefillDone records that request id finished its prefill at now and
// joined its decode batch.
func (c *Core) PrefillDone(id string, now time.Duration) error {
	f, ok := c.flights[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	f.prefilled, f.prefillEnd = true, now
	if f.decode == nil {
		c.forget(id, f)
	}
	return nil
}

// Finished records that request id left its decode batch (done, or
// aborted) at now.
func (c *Core) Finished(id string, _ time.Duration) error {
	f, ok := c.flights[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownRequest, id)
	}
	c.forget(id, f)
	return nil
}

// Expire forgets requests that should have finished decoding well before
// now (joined more than 2 t_d ago) but were never reported: a driver with
// no completion events calls it now and then so the core's view of decode
// batches does not grow without bound between heartbeats.
func (c *Core) Expire(now time.Duration) int {
	n := 0
	for id, f := range c.flights {
		if f.prefillEnd+2*c.opts.DecodeTime < now {
			c.forget(id, f)
			n++
		}
	}
	return n
}

func (c *Core) forget(id string, f *flight) {
	if f.decode != nil {
		f.decode.removeMember(f)
	}
	delete(c.flights, id)
}

// InFlight returns how many accepted requests the core tracks.
func (c *Core) InFlight() int { return len(c.flights) }
