package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/scheduler"
)

// PullMigrator carries out Algorithm 1's pull plans with real bytes: it
// asks the yuebing node on the target engine's host (Engine.Node) to copy
// the prefix's blocks from wherever the cluster holds them, through the
// cluster's transfer path, so the engine loads them locally. The router's
// view follows from what results: the index reports the node's new copies
// at the next query, and the engine's events report the blocks once it
// loads them. A target without a Node is left to fetch what it misses.
type PullMigrator struct {
	Router *Router
}

var _ scheduler.Migrator = (*PullMigrator)(nil)

// Migrate implements scheduler.Migrator.
func (m *PullMigrator) Migrate(ctx context.Context, keys []block.Key, from, to string) error {
	r := m.Router
	e := r.engines[to]
	if e == nil || e.Node == "" || len(keys) == 0 {
		return nil
	}
	body, err := json.Marshal(struct {
		Keys []block.Key `json:"keys"`
	}{keys[:min(len(keys), maxPoolKeys)]})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Node+"/v1/cluster/pull", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.opts.PoolToken != "" {
		req.Header.Set("Authorization", "Bearer "+r.opts.PoolToken)
	}
	resp, err := r.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("pull to %s from %s: %w", to, from, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pull to %s from %s: status %d: %s", to, from, resp.StatusCode, bytes.TrimSpace(msg))
	}
	r.log.Debug("router: pulled a prefix", "to", to, "from", from, "blocks", len(keys), "answer", string(msg))
	return nil
}
