package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// Read-your-writes across nodes rests on three things, in docs/cluster.md's
// consistency table:
//
//   - A put is registered with the leader before it is acknowledged
//     (Publish): one small delta report, the same the reporter would send a
//     report interval later, so the leader's work per put is one index
//     update. A reader on any node then finds the block through the
//     leader's index.
//   - The leader's locate answer says whether its index is complete: every
//     member has sent its full state in this term. While it is not (a new
//     leader, a node rejoining), or while no leader answers, a reader that
//     finds no holder asks the other nodes directly (askPeers), so a block
//     acknowledged under an old leader is not missed under a new one.
//   - A delete is sent to every other node before it is acknowledged
//     (Deleted): each drops its copy and its cached location of the block
//     and remembers the deletion for a while, so a read or a replica copy
//     in flight does not bring the block back.

// Publish registers the current state of keys (held, or not any more) with
// the leader, waiting for its answer up to Options.PeerTimeout. The server
// calls it after a put, before acknowledging. An error means the leader did
// not take it: the block is still stored here, the reporter sends its state
// at its next report, and until then readers on other nodes find it by
// asking the nodes directly only if the leader's index is incomplete. The
// caller logs it; the put stands.
func (n *Node) Publish(ctx context.Context, keys ...block.Key) error {
	if len(keys) == 0 || !n.started.Load() || n.closed.Load() {
		return nil
	}
	err := n.publish(ctx, keys)
	if err != nil {
		n.stats.publishFailures.Add(1)
		return err
	}
	n.stats.published.Add(int64(len(keys)))
	return nil
}

func (n *Node) publish(ctx context.Context, keys []block.Key) error {
	li, ok := n.Leader()
	if !ok {
		return ErrNoLeader
	}
	if n.rep.syncedTerm.Load() != li.Term {
		// The full state under way, or the deltas after it, carry the keys;
		// the leader calls its index incomplete until they arrive.
		return fmt.Errorf("%w: the full state for term %d is under way", ErrResync, li.Term)
	}
	m := Member{Name: li.Name, Addrs: Addrs{HTTP: li.HTTP}}
	ctx, cancel := context.WithTimeout(ctx, n.opts.PeerTimeout)
	defer cancel()
	for len(keys) > 0 {
		part := keys[:min(len(keys), MaxReportRecords)]
		keys = keys[len(part):]
		rep := n.rep.header(li) // the node's figures too: the leader refreshes them from every report
		rep.Records = make([]Record, 0, len(part))
		for _, k := range part {
			e, ok := n.store.Lookup(k)
			if !ok {
				e = index.Entry{}
			}
			rep.Records = append(rep.Records, n.rep.record(k, e))
		}
		var err error
		if l := n.lead.Load(); l != nil && l.term == li.Term {
			err = l.apply(&rep) // this node leads: no round trip
		} else {
			err = n.postReport(ctx, n.fast, m, appendReport(nil, &rep))
		}
		if err != nil {
			if errors.Is(err, ErrResync) || errors.Is(err, ErrNotLeader) {
				n.rep.resync()
			}
			return err
		}
	}
	return nil
}

// postReport sends an encoded report to the leader with client c.
func (n *Node) postReport(ctx context.Context, c *http.Client, leader Member, body []byte) error {
	resp, err := n.sendRaw(ctx, c, leader, "/internal/v1/report", body)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Deleted tells every other node that keys were deleted, and the leader
// that this node no longer holds them, waiting up to Options.PeerTimeout
// for each. It returns how many of keys another node held (and dropped).
// A node that does not answer keeps its copy until it rejoins; its reads
// are passed over meanwhile only if it is down. The server calls it after a
// delete, before acknowledging.
func (n *Node) Deleted(ctx context.Context, keys ...block.Key) (int, error) {
	if len(keys) == 0 || !n.started.Load() || n.closed.Load() {
		return 0, nil
	}
	n.forgetLocally(keys, true) // a copy admitted here meanwhile goes too
	ctx, cancel := context.WithTimeout(ctx, n.opts.PeerTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.publish(ctx, keys) })
	dropped := make([]bool, len(keys))
	var failed []string
	broadcast(ctx, n, "/internal/v1/forget", keysRequest{Keys: keys}, func(m Member, ans *forgetResponse, err error) {
		if err != nil || len(ans.Dropped) != len(keys) {
			failed = append(failed, m.Name)
			return
		}
		for i, d := range ans.Dropped {
			dropped[i] = dropped[i] || d
		}
	})
	wg.Wait()
	count := 0
	for _, d := range dropped {
		if d {
			count++
		}
	}
	if len(failed) > 0 {
		n.log.Warn("cluster: nodes did not take a delete; they drop their copies when they rejoin", "nodes", failed)
		return count, fmt.Errorf("%w: %v", ErrUnreachable, failed)
	}
	return count, nil
}

type forgetResponse struct {
	Dropped []bool `json:"dropped"`
}

// handleForget serves POST /internal/v1/forget: another node deleted the
// keys.
func (n *Node) handleForget(w http.ResponseWriter, r *http.Request) {
	var req keysRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if len(req.Keys) > maxRequestKeys {
		writeError(w, fmt.Errorf("%w: %d keys, at most %d", ErrBadRequest, len(req.Keys), maxRequestKeys))
		return
	}
	writeJSON(w, forgetResponse{Dropped: n.forgetLocally(req.Keys, true)})
}

// forgetLocally records keys as deleted (tombstones), drops their cached
// locations and, when drop is set, this node's copies.
func (n *Node) forgetLocally(keys []block.Key, drop bool) []bool {
	now := time.Now()
	out := make([]bool, len(keys))
	for i, k := range keys {
		n.tomb.Add(k, now)
		n.locs.Remove(k)
		if drop {
			n.desired.forget(k)
			out[i] = n.store.Delete(k) == nil
			if out[i] {
				n.stats.forgotten.Add(1)
			}
		}
	}
	return out
}

// tombstoneWindow is how far back a replica copy checks for a delete: a
// copy the leader planned from an index that still listed the block.
const tombstoneWindow = 30 * time.Second

// deletedSince reports whether k was deleted, here or on another node,
// after t: a copy fetched before then must not be kept.
func (n *Node) deletedSince(k block.Key, t time.Time) bool {
	at, ok := n.tomb.Peek(k)
	return ok && !at.Before(t)
}

type hasResponse struct {
	// Tiers holds, per key asked, the tiers this node holds it in (0:
	// none).
	Tiers []index.TierMask `json:"tiers"`
}

// handleHas serves POST /internal/v1/has: which of the keys this node holds.
func (n *Node) handleHas(w http.ResponseWriter, r *http.Request) {
	var req keysRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if len(req.Keys) > maxRequestKeys {
		writeError(w, fmt.Errorf("%w: %d keys, at most %d", ErrBadRequest, len(req.Keys), maxRequestKeys))
		return
	}
	out := hasResponse{Tiers: make([]index.TierMask, len(req.Keys))}
	for i, k := range req.Keys {
		if e, ok := n.store.Lookup(k); ok {
			out.Tiers[i] = e.Tiers
		}
	}
	writeJSON(w, out)
}

// askPeers asks every other member at once which of keys it holds: the
// fallback of a read that the leader cannot answer for. unreached names the
// members that did not answer.
func (n *Node) askPeers(ctx context.Context, keys []block.Key) (holders [][]index.Holder, unreached []string) {
	n.stats.peerAsks.Add(1)
	holders = make([][]index.Holder, len(keys))
	ctx, cancel := context.WithTimeout(ctx, n.opts.PeerTimeout)
	defer cancel()
	broadcast(ctx, n, "/internal/v1/has", keysRequest{Keys: keys}, func(m Member, ans *hasResponse, err error) {
		if err != nil || len(ans.Tiers) != len(keys) {
			unreached = append(unreached, m.Name)
			return
		}
		for i, t := range ans.Tiers {
			if t != 0 {
				holders[i] = append(holders[i], index.Holder{Node: m.ID, Tiers: t})
			}
		}
	})
	return holders, unreached
}
