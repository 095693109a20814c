package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// The consistency tests of docs/cluster.md: what one node acknowledges every
// node reads at once, and reads never answer 500 or wrong bytes while nodes
// die or freeze.

// TestClusterReadYourWrites: puts acknowledged on one node are read on
// another with no delay, with reports too rare to carry them; so are
// multi-puts and prefix queries; a delete on any node is served nowhere
// after it is acknowledged.
func TestClusterReadYourWrites(t *testing.T) {
	root := t.TempDir()
	slow := []string{"YUEBING_CLUSTER_REPORT_INTERVAL=1h"} // only the put's registration can make it visible
	a := serveClusterEnv(t, "a", filepath.Join(root, "a"), slow, "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")
	b := serveClusterEnv(t, "b", filepath.Join(root, "b"), slow, "--etcd", a.banner["etcd"])
	c := serveClusterEnv(t, "c", filepath.Join(root, "c"), slow, "--etcd", a.banner["etcd"])
	nodes := []*cnode{a, b, c}
	waitCluster(t, nodes...)

	n := 1000
	if testing.Short() {
		n = 100
	}
	keys := chainKeys(t, n, 50)
	misses := 0
	for i, k := range keys {
		w, r := nodes[i%3], nodes[(i+1)%3]
		data := testData(5000+i, 1000+i%4000)
		w.put(t, k, data, 0)
		if st, _ := r.get(t, k, data); st != 200 {
			misses++
			t.Errorf("put %d on %s, GET on %s: %d", i, w.name, r.name, st)
		}
	}
	if misses > 0 {
		t.Fatalf("%d of %d reads right after the put missed", misses, n)
	}
	// A prefix query on another node finds a chain just put.
	chain := chainKeys(t, 8, 51)
	for i, k := range chain {
		a.put(t, k, testData(6000+i, 2000), 0)
	}
	if ms, ok := c.query(t, chain); !ok || len(ms) == 0 || ms[0].Name != "a" || ms[0].PrefixLen != len(chain) {
		t.Fatalf("query on c right after the puts on a: %+v", ms)
	}
	// A multi-put on b, a multi-get on c: every block there.
	batch := chainKeys(t, 16, 52)
	items := make([]client.Item, len(batch))
	for i, k := range batch {
		items[i] = client.Item{Key: k, Data: testData(7000+i, 3000)}
	}
	cb, cc := b.client(t, ""), c.client(t, "")
	if _, err := cb.PutBatch(t.Context(), clusterNS, items); err != nil {
		t.Fatal(err)
	}
	got := 0
	err := cc.GetBatch(t.Context(), clusterNS, batch, func(f client.Frame, r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if !f.Missing && bytes.Equal(data, items[got].Data) {
			got++
		}
		return nil
	})
	if err != nil || got != len(batch) {
		t.Fatalf("multi-get on c right after a multi-put on b: %d of %d blocks, %v", got, len(batch), err)
	}
	// A delete on c of a block a holds and b has a copy of: gone everywhere.
	k, data := keys[0], testData(5000, 1000)
	for range 2 {
		b.get(t, k, data) // the second read keeps a copy on b
	}
	if st, body, _ := c.do(t, "DELETE", "/v1/blocks/"+k.String(), nil, map[string]string{"X-Yuebing-Namespace": clusterNS}); st != 200 {
		t.Fatalf("DELETE on c of a block held elsewhere: %d %s", st, body)
	}
	for _, nd := range nodes {
		if st, _ := nd.get(t, k, data); st != 404 {
			t.Errorf("GET on %s after the delete: %d", nd.name, st)
		}
	}
	// Deleting it again, or a block nobody stored, is a 404.
	if st, _, _ := b.do(t, "DELETE", "/v1/blocks/"+k.String(), nil, map[string]string{"X-Yuebing-Namespace": clusterNS}); st != 404 {
		t.Errorf("second DELETE: %d", st)
	}
}

// TestClusterDuplicateNodeName: a second node under a live node's name is
// refused at start, naming the live node's addresses.
func TestClusterDuplicateNodeName(t *testing.T) {
	root := t.TempDir()
	a := serveCluster(t, "a", filepath.Join(root, "a"), "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")
	waitCluster(t, a)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--cluster", "test", "--node-name", "a", "--etcd", a.banner["etcd"],
		"--http-listen", "127.0.0.1:0", "--transfer-listen", "127.0.0.1:0", "--resp-listen", "",
		"--data-dir", filepath.Join(root, "a2"), "--dram-capacity", "2MiB", "--lease-ttl", "2s", "--log-level", "warn")
	cmd.Env = envWithout("YUEBING_")
	out, err := cmd.CombinedOutput()
	host := strings.TrimPrefix(a.url, "http://")
	if err == nil || !strings.Contains(string(out), "node name in use") || !strings.Contains(string(out), host) {
		t.Fatalf("second node named a: %v\n%s", err, out)
	}
	// The first is unharmed.
	if st, ok := a.status(t); !ok || !st.HasLeader || len(st.Members) != 1 {
		t.Fatalf("a after the refused start: %+v", st)
	}
}

// TestClusterChaos kills (kill -9) and freezes (SIGSTOP) the leader and
// holders of replicated blocks in turn, and freezes etcd, while reads run
// on a third node: every read answers 200 with the right bytes, 404 or 503,
// never 500 and never a wrong byte; after each the cluster forms again and
// every block reads back.
func TestClusterChaos(t *testing.T) {
	etcd, etcdProc := etcdProcess(t)
	root := t.TempDir()
	var nodes []*cnode
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, serveCluster(t, name, filepath.Join(root, name), "--etcd", etcd))
	}
	leader := waitCluster(t, nodes...)
	byName := func(name string) int {
		for i, nd := range nodes {
			if nd.name == name {
				return i
			}
		}
		t.Fatalf("no node %q", name)
		return -1
	}
	// The reader is a node that does not lead; the others take turns dying.
	reader := nodes[(byName(leader)+1)%3]
	keys := chainKeys(t, 24, 60)
	want := map[block.Key][]byte{}
	for i, k := range keys {
		want[k] = testData(8000+i, 20_000+i*1000)
		nodes[i%3].put(t, k, want[k], 2)
	}
	waitFor(t, 30*time.Second, "2 replicas each", func() string {
		for _, k := range keys {
			if hs, _ := reader.holders(t, k); len(hs) < 2 {
				return fmt.Sprintf("%s held by %v", k, hs)
			}
		}
		return ""
	})

	var (
		stats  sync.Map // status -> *atomic.Int64
		wrong  atomic.Int64
		failed atomic.Int64
	)
	hc := &http.Client{Timeout: 15 * time.Second}
	never := chainKeys(t, 1, 61)[0] // stored nowhere: a 404, whatever is down
	readAll := func(ctx context.Context) {
		for i := 0; ctx.Err() == nil; i++ {
			k := keys[i%len(keys)]
			if i%10 == 9 {
				k = never
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", reader.url+"/v1/blocks/"+k.String(), nil)
			resp, err := hc.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					failed.Add(1)
					t.Errorf("GET on %s: %v", reader.name, err)
				}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				continue
			}
			v, _ := stats.LoadOrStore(resp.StatusCode, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			switch {
			case k == never && resp.StatusCode != 404:
				failed.Add(1)
				t.Errorf("GET of a block stored nowhere on %s: %d %s", reader.name, resp.StatusCode, body)
			case resp.StatusCode == 200:
				if !bytes.Equal(body, want[k]) {
					wrong.Add(1)
				}
			case resp.StatusCode == 404 || resp.StatusCode == 503:
				if bytes.Contains(body, []byte("127.0.0.1")) {
					t.Errorf("a %d answer names an address: %s", resp.StatusCode, body)
				}
			default:
				failed.Add(1)
				t.Errorf("GET on %s: %d %s", reader.name, resp.StatusCode, body)
			}
		}
	}
	rounds := []struct {
		victim string // "leader" or "holder"
		sig    syscall.Signal
	}{{"leader", syscall.SIGKILL}, {"holder", syscall.SIGSTOP}}
	if !testing.Short() {
		rounds = append(rounds, struct {
			victim string
			sig    syscall.Signal
		}{"holder", syscall.SIGKILL}, struct {
			victim string
			sig    syscall.Signal
		}{"leader", syscall.SIGSTOP})
	}
	// etcd frozen for less than a lease: reads do not need it.
	{
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { readAll(ctx) })
		etcdProc.Signal(syscall.SIGSTOP)
		time.Sleep(1500 * time.Millisecond)
		etcdProc.Signal(syscall.SIGCONT)
		cancel()
		wg.Wait()
		waitCluster(t, nodes...)
	}
	for _, r := range rounds {
		st, _ := reader.status(t)
		vi := byName(st.Leader.Name)
		if r.victim == "holder" || nodes[vi] == reader {
			for i := range nodes {
				if nodes[i] != reader && nodes[i].name != st.Leader.Name {
					vi = i
				}
			}
		}
		victim := nodes[vi]
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { readAll(ctx) })
		time.Sleep(200 * time.Millisecond)
		t.Logf("%v to %s (%s)", r.sig, victim.name, r.victim)
		victim.cmd.Process.Signal(r.sig)
		if victim.name == st.Leader.Name {
			// Leader loss is seen within the lease TTL: another leads.
			waitFor(t, 15*time.Second, "a new leader", func() string {
				s, ok := reader.status(t)
				if !ok || !s.HasLeader || s.Leader.Name == victim.name {
					return fmt.Sprintf("leader %+v", s.Leader)
				}
				return ""
			})
		} else {
			time.Sleep(3 * time.Second) // past the lease: the holder is gone
		}
		cancel()
		wg.Wait()
		if r.sig == syscall.SIGKILL {
			<-victim.done
			nodes[vi] = victim.restart(t)
		} else {
			victim.cmd.Process.Signal(syscall.SIGCONT)
		}
		waitCluster(t, nodes...)
		// Whole again: every block reads back on the reader.
		waitFor(t, 20*time.Second, "every block readable", func() string {
			for _, k := range keys {
				if st, _ := reader.get(t, k, want[k]); st != 200 {
					return fmt.Sprintf("GET %s: %d", k, st)
				}
			}
			return ""
		})
	}
	var summary []string
	stats.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%v: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("reads during the faults: %v", summary)
	if wrong.Load() > 0 || failed.Load() > 0 {
		t.Fatalf("%d wrong answers, %d failed reads", wrong.Load(), failed.Load())
	}
}
