package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// reporter sends the leader what the node holds. The store's change hook
// only marks a key dirty; the sender reads each dirty key's current state
// when it builds a report, so events that race (a demotion and a delete of
// one key) cannot leave the leader with a stale state: whatever happened
// last is what the next report says. The dirty set is bounded by
// Options.MaxPending; when it overflows, or the leader changes, or the
// leader asks, the node sends its full state instead.
type reporter struct {
	n      *Node
	sample atomic.Uint64
	kick   chan struct{}
	mu     struct {
		sync.Mutex
		dirty    map[block.Key]struct{}
		hits     map[block.Key]Hit
		needFull bool
	}
	// syncedTerm is the leader term the node's full state reached; 0 before.
	syncedTerm atomic.Int64
	lastSent   time.Time // owned by the loop goroutine
}

func newReporter(n *Node) *reporter {
	r := &reporter{n: n, kick: make(chan struct{}, 1)}
	r.mu.dirty = make(map[block.Key]struct{})
	r.mu.hits = make(map[block.Key]Hit)
	r.mu.needFull = true
	return r
}

// changed is the store's change hook: cheap, never blocks.
func (r *reporter) changed(key block.Key, _ int, _ bool) { r.touch(key) }

// touch marks key for the next report.
func (r *reporter) touch(key block.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.needFull {
		return // the full state will carry it
	}
	if len(r.mu.dirty) >= r.n.opts.MaxPending {
		r.mu.needFull = true
		clear(r.mu.dirty)
		return
	}
	r.mu.dirty[key] = struct{}{}
}

// accessed is the store's access hook: one access in HitSampling is
// counted, with the weight of all of them.
func (r *reporter) accessed(key block.Key, size int) {
	w := uint32(r.n.opts.HitSampling)
	if w > 1 && r.sample.Add(1)%uint64(w) != 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.mu.hits[key]; ok {
		h.Count += w
		r.mu.hits[key] = h
	} else if len(r.mu.hits) < r.n.opts.MaxHitKeys {
		r.mu.hits[key] = Hit{Key: key, Count: w, Size: uint64(size)}
	}
}

// resync asks for a full state at the next report.
func (r *reporter) resync() {
	r.mu.Lock()
	r.mu.needFull = true
	clear(r.mu.dirty)
	r.mu.Unlock()
	r.kickNow()
}

func (r *reporter) kickNow() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// heartbeat is how often an idle node still reports, so the leader has its
// figures (free memory, load) for placement.
const heartbeat = time.Second

func (r *reporter) loop() {
	t := time.NewTicker(r.n.opts.ReportInterval)
	defer t.Stop()
	backoff := time.Duration(0)
	for {
		// After a failed round the next waits out its backoff, tick or
		// kick or not, and then goes ahead even when the interval is long:
		// a full state the leader refused (it had not seen the node's
		// membership yet) must not wait for the next tick.
		if backoff > 0 {
			select {
			case <-r.n.ctx.Done():
				return
			case <-time.After(backoff):
			}
		} else {
			select {
			case <-r.n.ctx.Done():
				return
			case <-t.C:
			case <-r.kick:
			}
		}
		if err := r.step(); err != nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
			if !errors.Is(err, ErrNoLeader) {
				r.n.log.Debug("cluster: report failed", "err", err)
			}
			continue
		}
		backoff = 0
	}
}

// step sends one round: a full state when needed, else the pending deltas.
func (r *reporter) step() error {
	li, ok := r.n.Leader()
	if !ok {
		return ErrNoLeader
	}
	r.mu.Lock()
	full := r.mu.needFull || r.syncedTerm.Load() != li.Term
	if full {
		// Changes from here on are deltas after the full state.
		r.mu.needFull = false
		clear(r.mu.dirty)
	}
	r.mu.Unlock()
	if full {
		if err := r.sendFull(li); err != nil {
			r.mu.Lock()
			r.mu.needFull = true
			r.mu.Unlock()
			return err
		}
		r.syncedTerm.Store(li.Term)
		r.n.stats.resyncs.Add(1)
		return nil
	}
	return r.sendDeltas(li)
}

func (r *reporter) header(li LeaderInfo) report {
	rep := report{Node: r.n.id, Term: uint64(li.Term)}
	st := r.n.store.Stats()
	if len(st.Tiers) > 0 {
		// The top tier is a cache: every block in it that is not soft-pinned
		// can make room for a replica, so free is what pins leave.
		rep.Capacity = uint64(st.Tiers[0].Capacity)
		rep.Free = uint64(max(0, st.Tiers[0].Capacity-st.Tiers[0].Pinned))
	}
	rep.Load = r.n.load()
	return rep
}

func (r *reporter) record(k block.Key, e index.Entry) Record {
	return Record{Key: k, Tiers: e.Tiers, Desired: r.n.desired.get(k), PinnedUntil: e.PinnedUntil, Size: uint64(e.Size)}
}

// sendFull streams the node's whole state in reports of up to
// MaxReportRecords records; the first is flagged FullBegin, the last
// FullEnd.
func (r *reporter) sendFull(li LeaderInfo) error {
	recs := make([]Record, 0, 1024)
	first := true
	send := func(last bool) error {
		rep := r.header(li)
		if first {
			rep.Flags |= flagFullBegin
		}
		if last {
			rep.Flags |= flagFullEnd
		}
		rep.Records = recs
		if err := r.send(li, &rep); err != nil {
			return err
		}
		first = false
		recs = recs[:0]
		return nil
	}
	cursor := uint64(0)
	for {
		var err error
		cursor = r.n.store.Scan(cursor, 4096, func(k block.Key, e index.Entry) bool {
			if e.Tiers == 0 {
				return true
			}
			recs = append(recs, r.record(k, e))
			if len(recs) == MaxReportRecords {
				err = send(false)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
		if cursor == 0 {
			break
		}
	}
	return send(true)
}

// sendDeltas sends the dirty keys' current state and the hits counted,
// at most MaxReportRecords of each per report, or a heartbeat when there is
// nothing to say and the last report is a while ago.
func (r *reporter) sendDeltas(li LeaderInfo) error {
	for {
		r.mu.Lock()
		keys := make([]block.Key, 0, min(len(r.mu.dirty), MaxReportRecords))
		for k := range r.mu.dirty {
			if len(keys) == MaxReportRecords {
				break
			}
			keys = append(keys, k)
			delete(r.mu.dirty, k)
		}
		var hits []Hit
		for k, h := range r.mu.hits {
			if len(hits) == MaxReportRecords {
				break
			}
			hits = append(hits, h)
			delete(r.mu.hits, k)
		}
		more := len(r.mu.dirty) > 0
		r.mu.Unlock()
		if len(keys) == 0 && len(hits) == 0 && time.Since(r.lastSent) < heartbeat {
			return nil
		}
		rep := r.header(li)
		for _, k := range keys {
			e, ok := r.n.store.Lookup(k)
			if !ok {
				e = index.Entry{}
				r.n.desired.forget(k)
			}
			rep.Records = append(rep.Records, r.record(k, e))
		}
		rep.Hits = hits
		if err := r.send(li, &rep); err != nil {
			// Put the keys back: their state is read again next time.
			// Hits are dropped; heat is an estimate.
			for _, k := range keys {
				r.touch(k)
			}
			if errors.Is(err, ErrResync) || errors.Is(err, ErrNotLeader) {
				r.resync()
			}
			return err
		}
		if !more {
			return nil
		}
	}
}

func (r *reporter) send(li LeaderInfo, rep *report) error {
	body := appendReport(nil, rep)
	ctx, cancel := context.WithTimeout(r.n.ctx, r.n.opts.RequestTimeout)
	defer cancel()
	if err := r.n.postReport(ctx, r.n.client, Member{Name: li.Name, Addrs: Addrs{HTTP: li.HTTP}}, body); err != nil {
		return err
	}
	r.lastSent = time.Now()
	r.n.stats.reports.Add(1)
	return nil
}
