package tier

import (
	"sync"
	"sync/atomic"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier/policy"
)

// SSD write admission: which blocks evicted from the top tier are written
// to the one below (HierarchyOptions.Admission). The policy itself is
// policy.Admission, the same code `yuebing bench hitrate --ssd-capacity`
// replays the traces through; see docs/policies.md for its measured
// write/hit trade-off.

// admission feeds the hierarchy's events to the policy. One mutex guards
// it: every call is a few map operations, far cheaper than the demotion or
// put it rides on, so it is not sharded.
type admission struct {
	mu      sync.Mutex
	p       *policy.Admission[block.Key]
	refused atomic.Int64
}

// startAdmission makes the policy HierarchyOptions.Admission names, if it
// is not AdmitAll, and subscribes it to the hierarchy's reads and copies.
// Blocks put (or created) without a parent are admitted as by AdmitAll.
func (h *Hierarchy) startAdmission() error {
	if h.opts.Admission == policy.AdmitAll || len(h.tiers) < 2 {
		return nil
	}
	p, err := policy.NewAdmission[block.Key](h.opts.Admission, h.opts.AdmissionGhost)
	if err != nil {
		return err
	}
	a := &admission{p: p}
	h.admission = a
	h.OnAccess(func(key block.Key, _ int) {
		e, ok := h.ix.Get(key)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.p.Access(key)
		// Promotion is asynchronous, so a read served from below still
		// finds only the lower copies indexed.
		if ok && !e.Tiers.Has(0) && e.Tiers.Has(1) {
			a.p.HitBelow(key)
		}
	})
	h.OnChange(func(key block.Key, level int, added bool) {
		if added {
			return
		}
		e, ok := h.ix.Get(key)
		a.mu.Lock()
		defer a.mu.Unlock()
		if level == 1 {
			a.p.Dropped(key)
		}
		if !ok || e.Tiers == 0 {
			a.p.Forget(key) // no tier holds it: keep only its ghost
		}
	})
	return nil
}

// noteParent tells the policy, before a put, that the put's parent has a
// child, so that the eviction the put itself causes sees it extended.
func (h *Hierarchy) noteParent(opts PutOptions) {
	if a := h.admission; a != nil && opts.HasParent {
		a.mu.Lock()
		a.p.Extend(opts.Parent)
		a.mu.Unlock()
	}
}

// notePut tells the policy of a block stored with its chain parent.
func (h *Hierarchy) notePut(key block.Key, opts PutOptions) {
	if a := h.admission; a != nil {
		a.mu.Lock()
		a.p.Put(key, opts.Parent, opts.HasParent)
		a.mu.Unlock()
	}
}

// admitDemotion reports whether a block evicted from tier level is written
// to the tier below; the policy judges only the top tier's evictions.
func (h *Hierarchy) admitDemotion(key block.Key, level int) bool {
	a := h.admission
	if a == nil || level != 0 {
		return true
	}
	held := func(k block.Key) bool {
		e, ok := h.ix.Get(k)
		return ok && e.Tiers != 0
	}
	a.mu.Lock()
	ok := a.p.Admit(key, held)
	a.mu.Unlock()
	if !ok {
		a.refused.Add(1)
	}
	return ok
}

// AdmissionRefused returns how many evicted blocks the admission policy
// kept from the tier below (0 under AdmitAll).
func (h *Hierarchy) AdmissionRefused() int64 {
	if a := h.admission; a != nil {
		return a.refused.Load()
	}
	return 0
}
