package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/scheduler"
)

// maxPoolKeys is how much of a chain one index query asks about: the
// pool nodes' default batch limit. A longer prompt's tail rarely sits in
// the pool without its head, and a prefix match stops at the first miss.
const maxPoolKeys = 4096

// poolIndex asks yuebing nodes for the cluster index's prefix matches.
type poolIndex struct {
	urls    []string
	token   string
	timeout time.Duration
	client  *http.Client
	// alone marks, per url, a node that runs without a cluster (its
	// cluster endpoints answer 404 no_cluster): it is asked what it holds
	// itself (POST /v1/batch/exists) instead of the cluster's index.
	alone []atomic.Bool
}

func newPoolIndex(urls []string, token string, timeout time.Duration, c *http.Client) *poolIndex {
	if len(urls) == 0 {
		return nil
	}
	return &poolIndex{urls: urls, token: token, timeout: timeout, client: c, alone: make([]atomic.Bool, len(urls))}
}

type poolMatch struct {
	Name      string         `json:"name"`
	PrefixLen int            `json:"prefix_len"`
	Tiers     map[string]int `json:"tiers"`
}

// query returns the nodes holding a prefix of keys (chained under
// namespace ns), from the first node that answers: a cluster node's index
// answers for every node, a node alone for itself.
func (p *poolIndex) query(ctx context.Context, ns string, keys []block.Key) ([]poolMatch, error) {
	keys = keys[:min(len(keys), maxPoolKeys)]
	body, err := json.Marshal(struct {
		Keys []block.Key `json:"keys"`
	}{keys})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var last error
	for i, u := range p.urls {
		if p.alone[i].Load() {
			m, err := p.queryAlone(ctx, u, ns, keys)
			if err != nil {
				last = err
				continue
			}
			return m, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u+"/v1/cluster/query", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if p.token != "" {
			req.Header.Set("Authorization", "Bearer "+p.token)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			last = err
			continue
		}
		var out struct {
			Nodes []poolMatch `json:"nodes"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound && out.Error != nil && out.Error.Code == "no_cluster" {
			// A node alone: from now on it is asked for its own blocks.
			p.alone[i].Store(true)
			m, err := p.queryAlone(ctx, u, ns, keys)
			if err != nil {
				last = err
				continue
			}
			return m, nil
		}
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s: status %d", u, resp.StatusCode)
			continue
		}
		if err != nil {
			last = fmt.Errorf("%s: %w", u, err)
			continue
		}
		return out.Nodes, nil
	}
	return nil, last
}

// queryAlone asks a node that runs alone which prefix of keys it holds
// (POST /v1/batch/exists), as one match named by its URL.
func (p *poolIndex) queryAlone(ctx context.Context, u, ns string, keys []block.Key) ([]poolMatch, error) {
	body, err := json.Marshal(struct {
		Namespace string      `json:"namespace"`
		Keys      []block.Key `json:"keys"`
	}{ns, keys})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u+"/v1/batch/exists", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		PrefixLen   int            `json:"prefix_len"`
		PrefixTiers map[string]int `json:"prefix_tiers"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/v1/batch/exists: status %d", u, resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("%s/v1/batch/exists: %w", u, err)
	}
	if out.PrefixLen == 0 {
		return nil, nil
	}
	return []poolMatch{{Name: nodeName(u), PrefixLen: out.PrefixLen, Tiers: out.PrefixTiers}}, nil
}

// nodeName names a node alone by its URL's host and port.
func nodeName(u string) string {
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		return pu.Host
	}
	return u
}

// poolInstance is the store instance id of a pool node.
func poolInstance(name string) string { return "pool:" + name }

// poolHits turns the index's matches into scheduler pool hits, registering
// pool nodes as store instances the first time they appear. A failed query
// places the request without pool hits: the pool is an optimisation.
func (r *Router) poolHits(ctx context.Context, ns string, keys []block.Key) []scheduler.PoolHit {
	ms, err := r.pool.query(ctx, ns, keys)
	if err != nil {
		r.m.poolErrors.Inc()
		r.log.Debug("router: cluster index query failed", "err", err)
		return nil
	}
	var hits []scheduler.PoolHit
	for _, m := range ms {
		if m.PrefixLen < 1 || m.PrefixLen > len(keys) {
			continue
		}
		id := poolInstance(m.Name)
		if !r.ensureStore(id) {
			continue
		}
		src := scheduler.SourceDRAM
		if m.Tiers["ssd"] > 0 {
			src = scheduler.SourceSSD
		}
		hits = append(hits, scheduler.PoolHit{Instance: id, Blocks: m.PrefixLen, Source: src})
	}
	return hits
}

// ensureStore registers a pool node's store instance once.
func (r *Router) ensureStore(id string) bool {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	if r.stores == nil {
		r.stores = map[string]bool{}
	}
	if ok, seen := r.stores[id]; seen {
		return ok
	}
	err := r.d.AddInstance(scheduler.Instance{ID: id, Role: scheduler.RoleStore})
	if err != nil {
		r.log.Warn("router: cannot track pool node", "instance", id, "err", err)
	}
	r.stores[id] = err == nil
	return err == nil
}
