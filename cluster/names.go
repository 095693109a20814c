package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// Named blocks are the Redis front end's keys: a mutable name whose value
// is an immutable block, so the name cannot be derived from the block key
// the way a KV chain's can. Each node's front end knows only the names set
// through it; a node that misses a name asks the others (LookupName) and
// reads the block from the node that answered (ReadFrom).

// NameInfo is a node's answer for a name it holds.
type NameInfo struct {
	// Key is the block holding the name's value.
	Key block.Key `json:"key"`
	// Size is the value's length in bytes.
	Size int64 `json:"size"`
	// ExpireAtMs is the name's deadline in Unix milliseconds, 0 for none.
	ExpireAtMs int64 `json:"expire_at_ms,omitempty"`
	// Node is the id of the node that answered.
	Node uint32 `json:"node"`
}

// NameLookup answers for the names this node holds: ok is false when it
// holds none by that name (or it expired).
type NameLookup func(namespace, name string) (info NameInfo, ok bool)

type nameRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// maxNameLen bounds a looked-up name; the front end's keys are shorter.
const maxNameLen = 64 << 10

// SetNameLookup installs the function that answers other nodes' LookupName
// calls. Until it is set the node answers not found.
func (n *Node) SetNameLookup(fn NameLookup) { n.names.Store(&fn) }

func (n *Node) handleName(w http.ResponseWriter, r *http.Request) {
	var req nameRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	fn := n.names.Load()
	if fn == nil {
		writeError(w, tier.ErrNotFound)
		return
	}
	info, ok := (*fn)(req.Namespace, req.Name)
	if !ok {
		writeError(w, tier.ErrNotFound)
		return
	}
	info.Node = n.id
	writeJSON(w, info)
}

// LookupName asks every other member, at once, whether it holds name in
// namespace, and returns the first positive answer; tier.ErrNotFound when
// none does. A member that fails to answer within Options.RequestTimeout
// counts as not holding it. A name set on two nodes is two keys; which one
// a third node finds is whichever answers first.
func (n *Node) LookupName(ctx context.Context, namespace, name string) (NameInfo, error) {
	if len(name) > maxNameLen {
		return NameInfo{}, fmt.Errorf("%w: name of %d bytes", ErrBadRequest, len(name))
	}
	var peers []Member
	for _, m := range n.Members() {
		if m.ID != n.id {
			peers = append(peers, m)
		}
	}
	if len(peers) == 0 {
		return NameInfo{}, tier.ErrNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.RequestTimeout)
	defer cancel() // the answers not waited for are abandoned
	type answer struct {
		info NameInfo
		err  error
	}
	answers := make(chan answer, len(peers))
	req := nameRequest{Namespace: namespace, Name: name}
	for _, m := range peers {
		go func() {
			var a answer
			a.err = n.postJSON(ctx, m.Addrs.HTTP, "/internal/v1/name", req, &a.info)
			answers <- a
		}()
	}
	var failed error
	for range peers {
		a := <-answers
		switch {
		case a.err == nil:
			n.stats.nameHits.Add(1)
			return a.info, nil
		case !errors.Is(a.err, tier.ErrNotFound):
			failed = a.err
		}
	}
	n.stats.nameMisses.Add(1)
	if failed != nil && ctx.Err() == nil {
		n.log.Debug("cluster: looking up a name", "err", failed)
	}
	return NameInfo{}, tier.ErrNotFound
}

// ReadFrom reads a block from the given node over the transfer service,
// checksum verified, and does not keep it: a named block may be replaced
// on its node at any time, so a copy here would go stale unseen.
func (n *Node) ReadFrom(ctx context.Context, key block.Key, node uint32) (*tier.Handle, error) {
	if n.closed.Load() {
		return nil, tier.ErrNotFound
	}
	start := time.Now()
	h, _, err := n.fetchFrom(ctx, key, node)
	if err != nil {
		n.stats.fetchFailures.Add(1)
		return nil, err
	}
	n.log.Debug("cluster: read a named block", "key", key, "node", node, "took", time.Since(start))
	return h, nil
}
