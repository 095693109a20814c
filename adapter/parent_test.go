package adapter_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/internal/servetest"
)

// TestSaveNamesParents: the parents the adapter names for every saved
// layer group and commit record let a node with ssd.admission chain tell
// the interior of each request's chain from its tail, though a save batch
// mixes the groups of two requests: once DRAM evicts them, the interior
// blocks' groups and commit records are on SSD and the tails' are gone.
// Without parents the node would admit all of them, as under all.
func TestSaveNamesParents(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testSaveNamesParents(t, tr.args, tr.off, tr.shm) })
	}
}

func testSaveNamesParents(t *testing.T, args []string, noShm, shm bool) {
	conf := filepath.Join(t.TempDir(), "yuebing.yaml")
	if err := os.WriteFile(conf, []byte("ssd:\n  admission: chain\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// 1 MiB of DRAM: the filler below pushes every saved block out.
	_, url := servetest.Serve(t, append([]string{"--config", conf, "--dram-capacity", "1MiB"}, args...)...)
	// Two groups a block, so a group's parent must be its own group of the
	// block before, not merely some key of that block.
	layout := testLayout
	layout.GroupLayers = testLayout.Layers / 2
	c := connector(t, url, func(o *adapter.Options) { o.DisableShm, o.Layout = noShm, layout })
	ctx := t.Context()

	// Two requests of three blocks each, saved layer by layer in step, so
	// every put batch carries groups of both.
	var (
		plans []adapter.Plan
		saves []*adapter.Save
		srcs  []*pool
	)
	for seed := range 2 {
		plan, err := c.Lookup(ctx, tokens(40+seed, 3*16))
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Keys) != 3 || plan.HitBlocks != 0 {
			t.Fatalf("cold plan %d: %+v", seed, plan)
		}
		plans = append(plans, plan)
		saves = append(saves, c.Save(plan))
		srcs = append(srcs, computed(plan.Keys))
	}
	for l := range testLayout.Layers {
		for i, sv := range saves {
			if !sv.Layer(l, srcs[i]) {
				t.Fatalf("request %d layer %d dropped", i, l)
			}
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Committed != 6 || s.Dropped != 0 || (s.ShmSaveRequests > 0) != shm {
		t.Fatalf("stats after save (shared memory expected %v): %+v", shm, s)
	}

	// Every key the saves wrote (each block's groups, then its commit
	// record under its chain key), and whether it is its chain's tail.
	var (
		keys  []block.Key
		tails []bool
	)
	for _, plan := range plans {
		for b, k := range plan.Keys {
			for g := range layout.Groups() {
				keys = append(keys, layout.GroupKey(k, g))
				tails = append(tails, b == len(plan.Keys)-1)
			}
			keys = append(keys, k)
			tails = append(tails, b == len(plan.Keys)-1)
		}
	}

	cl, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	filler := make([]byte, 64<<10)
	for i := range 40 { // 2.5 MiB through a 1 MiB DRAM tier
		k := block.OpaqueKey(ns, fmt.Appendf(nil, "filler-%d", i))
		if _, err := cl.Put(ctx, ns, k, filler); err != nil {
			t.Fatal(err)
		}
	}
	var where []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m, err := cl.Exists(ctx, ns, keys)
		if err != nil {
			t.Fatal(err)
		}
		where = m.Tiers
		settled := true
		for _, w := range where {
			settled = settled && w != "dram"
		}
		if settled || time.Now().After(deadline) {
			break
		}
	}
	for i, w := range where {
		want := "ssd"
		if tails[i] {
			want = ""
		}
		if w != want {
			t.Errorf("key %d of %d (%s, tail %v) held in %q after eviction; want %q", i, len(keys), keys[i], tails[i], w, want)
		}
	}
}
