package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/internal/bytesize"
)

// pinQuotaRefusals reads yuebing_pin_quota_refusals_total of ns from reg.
func pinQuotaRefusals(t *testing.T, reg *prometheus.Registry, ns string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "yuebing_pin_quota_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == ns {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// waitUntil is waitFor with the last reason the condition gave on a timeout.
func waitUntil(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicaPinsChargedOnArrival runs three nodes on an embedded etcd: a
// hard-pinned block's replica is charged to the receiving node's
// retention.pinned_quota when it lands, a node whose quota it would pass
// refuses it (counting the refusal) and the leader places it on another
// node, and a replica the leader drops is credited where it was.
func TestReplicaPinsChargedOnArrival(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd and three nodes")
	}
	e, err := cluster.StartEmbedded(cluster.EmbedOptions{Dir: t.TempDir(), ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	const size = 50_000
	regs := map[string]*prometheus.Registry{}
	with := func(name string, quota bytesize.Size) func(*cluster.Options, *APIOptions) {
		return func(c *cluster.Options, a *APIOptions) {
			// Quick ticks, retries and drops, so the test takes seconds.
			c.ReplicationInterval = 50 * time.Millisecond
			c.Replication.RetryBackoff = 200 * time.Millisecond
			c.Replication.Cooldown = 500 * time.Millisecond
			a.Retention.PinnedQuota = &quota
			regs[name] = prometheus.NewRegistry()
			a.Registry = regs[name]
		}
	}
	a := startClusterNode(t, e.Endpoint(), "a", with("a", 1<<20))
	b := startClusterNode(t, e.Endpoint(), "b", with("b", size-1)) // no room for one pin
	c := startClusterNode(t, e.Endpoint(), "c", with("c", 1<<20))
	nodes := map[string]*clusterTestNode{"a": a, "b": b, "c": c}
	waitUntil(t, "three members", func() error {
		if n := len(a.node.Members()); n != 3 {
			return fmt.Errorf("%d members", n)
		}
		return nil
	})
	keys := chain(t, nsAlpha, 2, 21)
	put := func(i, replicas int) {
		t.Helper()
		r := do(t, a.testNode, http.MethodPut, "/v1/blocks/"+keys[i].String(), tokAlpha, map[string]string{
			HeaderNamespace: nsAlpha, HeaderRetention: "pinned", HeaderReplicas: fmt.Sprint(replicas),
		}, payload(uint64(30+i), size))
		if r.status != http.StatusCreated {
			t.Fatalf("pinned put %d: %d %s", i, r.status, r.body)
		}
	}
	pinned := func(name string) int64 { return nodes[name].api.PinnedBytes()[nsAlpha] }

	// Two replicas: b cannot take the pin, so the second lands on c and
	// is charged there at once.
	put(0, 2)
	waitUntil(t, "k0's replica on c", func() error {
		if !c.store.Contains(keys[0]) || pinned("c") != size {
			return fmt.Errorf("c holds it: %v, c's pinned bytes %d", c.store.Contains(keys[0]), pinned("c"))
		}
		return nil
	})
	// Three replicas: b is the only node left, so the leader asks it, and
	// it refuses rather than keep the block unpinned or over its quota.
	put(1, 3)
	waitUntil(t, "k1's replicas on c and a refusal on b", func() error {
		if !c.store.Contains(keys[1]) || pinQuotaRefusals(t, regs["b"], nsAlpha) == 0 {
			return fmt.Errorf("c holds it: %v, b's refusals %v", c.store.Contains(keys[1]), pinQuotaRefusals(t, regs["b"], nsAlpha))
		}
		return nil
	})
	if b.store.Contains(keys[0]) || b.store.Contains(keys[1]) || pinned("b") != 0 {
		t.Fatalf("b holds k0 %v, k1 %v, pinned bytes %d: want nothing over its quota",
			b.store.Contains(keys[0]), b.store.Contains(keys[1]), pinned("b"))
	}
	if pinned("a") != 2*size || pinned("c") != 2*size {
		t.Fatalf("pinned bytes a %d, c %d; want %d on both", pinned("a"), pinned("c"), 2*size)
	}

	// One replica: the leader drops one of k0's two copies, and the node
	// that lost it is credited.
	if r := do(t, a.testNode, http.MethodPost, "/v1/blocks/"+keys[0].String()+"/replicas", tokAlpha,
		map[string]string{HeaderNamespace: nsAlpha}, []byte(`{"count":1}`)); r.status/100 != 2 {
		t.Fatalf("replicas 1: %d %s", r.status, r.body)
	}
	waitUntil(t, "k0 dropped from one node and credited there", func() error {
		var held, credited int
		for _, name := range []string{"a", "c"} {
			if nodes[name].store.Contains(keys[0]) {
				held++
			} else if pinned(name) == size {
				credited++
			}
		}
		if held != 1 || credited != 1 {
			return fmt.Errorf("%d nodes hold k0, %d credited; a %d, c %d pinned bytes", held, credited, pinned("a"), pinned("c"))
		}
		return nil
	})
}
