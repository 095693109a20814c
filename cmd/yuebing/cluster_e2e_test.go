package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// The cluster end-to-end tests run real `yuebing serve --cluster` processes
// on 127.0.0.1 against a real etcd: the one a node embeds, and Debian's
// etcd-server started by the test. Lease TTLs are 2 s so failures are
// noticed within seconds.

const clusterNS = "acme/llama"

// cnode is a cluster node process and what its banner said.
type cnode struct {
	*node
	name, dir string
	banner    map[string]string
	args      []string
	env       []string
}

// serveCluster starts `yuebing serve --cluster test` as name with data
// under dir, on free ports, and waits for its banner.
func serveCluster(t *testing.T, name, dir string, args ...string) *cnode {
	t.Helper()
	return serveClusterEnv(t, name, dir, nil, args...)
}

// serveClusterEnv is serveCluster with environment variables that override
// the test's defaults (YUEBING_CLUSTER_REPORT_INTERVAL=50ms).
func serveClusterEnv(t *testing.T, name, dir string, env []string, args ...string) *cnode {
	t.Helper()
	base := []string{"serve", "--cluster", "test", "--node-name", name,
		"--http-listen", "127.0.0.1:0", "--transfer-listen", "127.0.0.1:0", "--resp-listen", "",
		"--data-dir", dir, "--dram-capacity", "2MiB", "--ssd-capacity", "64MiB",
		"--lease-ttl", "2s", "--shutdown-timeout", "10s", "--log-level", "warn"}
	cmd := exec.Command(binary, append(base, args...)...)
	cmd.Env = append(envWithout("YUEBING_"),
		"YUEBING_CLUSTER_ETCD_EMBEDDED_PEER_LISTEN=127.0.0.1:0",
		"YUEBING_CLUSTER_REPORT_INTERVAL=50ms")
	cmd.Env = append(cmd.Env, env...)
	nd, banner := start(t, name, cmd, "data")
	return &cnode{node: nd, name: name, dir: dir, args: args, env: env, banner: banner}
}

// restart starts the node again with the same name, data, environment and
// flags.
func (n *cnode) restart(t *testing.T) *cnode {
	t.Helper()
	return serveClusterEnv(t, n.name, n.dir, n.env, n.args...)
}

func (n *cnode) kill(t *testing.T) {
	t.Helper()
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

func (n *cnode) do(t *testing.T, method, path string, body []byte, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, n.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func (n *cnode) put(t *testing.T, k block.Key, data []byte, replicas int) {
	t.Helper()
	hdr := map[string]string{"X-Yuebing-Namespace": clusterNS}
	if replicas > 0 {
		hdr["X-Yuebing-Replicas"] = fmt.Sprint(replicas)
	}
	if st, b, _ := n.do(t, "PUT", "/v1/blocks/"+k.String(), data, hdr); st != 201 {
		t.Fatalf("put on %s: %d %s", n.name, st, b)
	}
}

// get reads a block; it fails the test if a 200 carries wrong bytes.
func (n *cnode) get(t *testing.T, k block.Key, want []byte) (int, string) {
	t.Helper()
	st, b, h := n.do(t, "GET", "/v1/blocks/"+k.String(), nil, nil)
	if st == 200 && !bytes.Equal(b, want) {
		t.Fatalf("GET %s on %s served %d wrong bytes (source %s)", k, n.name, len(b), h.Get("X-Yuebing-Source"))
	}
	if st == 200 && h.Get("X-Yuebing-Crc32c") != fmt.Sprintf("%08x", block.Checksum(want)) {
		t.Fatalf("GET %s on %s: crc header %s", k, n.name, h.Get("X-Yuebing-Crc32c"))
	}
	return st, h.Get("X-Yuebing-Source")
}

func (n *cnode) postJSON(t *testing.T, path string, in, out any) int {
	t.Helper()
	body, _ := json.Marshal(in)
	st, b, _ := n.do(t, "POST", path, body, map[string]string{"Content-Type": "application/json"})
	if st == 200 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, b)
		}
	}
	return st
}

type clusterStatus struct {
	Leader struct {
		ID   uint32 `json:"id"`
		Name string `json:"name"`
		Term int64  `json:"term"`
	} `json:"leader"`
	HasLeader bool `json:"has_leader"`
	Members   []struct {
		Name  string `json:"name"`
		Addrs struct {
			RESP string `json:"resp"`
		} `json:"addrs"`
	} `json:"members"`
	LeaderStatus *struct {
		Blocks int      `json:"blocks"`
		Nodes  []uint32 `json:"nodes"`
	} `json:"leader_status"`
}

func (n *cnode) status(t *testing.T) (clusterStatus, bool) {
	t.Helper()
	var st clusterStatus
	code, b, _ := n.do(t, "GET", "/v1/cluster", nil, nil)
	if code != 200 {
		return st, false
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st, true
}

// holders returns the names of the nodes holding k, sorted, and their tiers.
func (n *cnode) holders(t *testing.T, k block.Key) ([]string, map[string][]string) {
	t.Helper()
	var resp struct {
		Blocks []struct {
			Nodes []struct {
				Name  string   `json:"name"`
				Tiers []string `json:"tiers"`
			} `json:"nodes"`
		} `json:"blocks"`
	}
	if n.postJSON(t, "/v1/cluster/holders", map[string]any{"keys": []block.Key{k}}, &resp) != 200 || len(resp.Blocks) != 1 {
		return nil, nil
	}
	var names []string
	tiers := map[string][]string{}
	for _, h := range resp.Blocks[0].Nodes {
		names = append(names, h.Name)
		tiers[h.Name] = h.Tiers
	}
	slices.Sort(names)
	return names, tiers
}

type match struct {
	Name      string         `json:"name"`
	PrefixLen int            `json:"prefix_len"`
	Tiers     map[string]int `json:"tiers"`
}

func (n *cnode) query(t *testing.T, chain []block.Key) ([]match, bool) {
	t.Helper()
	var resp struct {
		Nodes []match `json:"nodes"`
	}
	if n.postJSON(t, "/v1/cluster/query", map[string]any{"keys": chain}, &resp) != 200 {
		return nil, false
	}
	return resp.Nodes, true
}

// waitFor polls f until it returns "" or d passes.
func waitFor(t *testing.T, d time.Duration, what string, f func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, d, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitCluster waits until every node sees them all and one leader that
// has every node's full state.
func waitCluster(t *testing.T, nodes ...*cnode) string {
	t.Helper()
	var leader string
	waitFor(t, 30*time.Second, "cluster formed", func() string {
		for _, n := range nodes {
			st, ok := n.status(t)
			switch {
			case !ok:
				return n.name + ": no status"
			case !st.HasLeader:
				return n.name + ": no leader"
			case len(st.Members) != len(nodes):
				return fmt.Sprintf("%s sees %d members", n.name, len(st.Members))
			case st.LeaderStatus == nil || len(st.LeaderStatus.Nodes) != len(nodes):
				return n.name + ": the leader has not heard from every node"
			}
			leader = st.Leader.Name
		}
		return ""
	})
	return leader
}

func chainKeys(t *testing.T, n int, seed uint32) []block.Key {
	t.Helper()
	tokens := make([]uint32, 16*n)
	for i := range tokens {
		tokens[i] = seed*7919 + uint32(i)
	}
	keys, err := block.ChainKeys(clusterNS, 16, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestClusterEmbeddedEtcd(t *testing.T) {
	root := t.TempDir()
	a := serveCluster(t, "a", filepath.Join(root, "a"), "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0")
	etcd := a.banner["etcd"]
	if !strings.HasPrefix(etcd, "http://127.0.0.1:") {
		t.Fatalf("banner names no embedded etcd: %v", a.banner)
	}
	b := serveCluster(t, "b", filepath.Join(root, "b"), "--etcd", etcd)
	c := serveCluster(t, "c", filepath.Join(root, "c"), "--etcd", etcd)
	waitCluster(t, a, b, c)

	// Put on A, read on B and C: the same bytes, from A.
	keys := chainKeys(t, 4, 1)
	data := map[block.Key][]byte{}
	for i, k := range keys {
		data[k] = testData(100+i, 200_000)
		a.put(t, k, data[k], 0)
	}
	waitFor(t, 10*time.Second, "blocks indexed", func() string {
		if hs, _ := c.holders(t, keys[3]); !slices.Equal(hs, []string{"a"}) {
			return fmt.Sprintf("holders %v", hs)
		}
		return ""
	})
	for _, n := range []*cnode{b, c} {
		if st, src := n.get(t, keys[0], data[keys[0]]); st != 200 || src != "a" {
			t.Fatalf("GET on %s: %d from %q", n.name, st, src)
		}
	}
	if st, src := a.get(t, keys[0], data[keys[0]]); st != 200 || src != "a" {
		t.Fatalf("local GET on a: %d from %q", st, src)
	}
	// A multi-get on C reads A's blocks too, each frame checksummed and
	// marked as read from another node; unknown keys are missing.
	cl, err := client.New(c.url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	missing := chainKeys(t, 1, 77)[0]
	want := [][]byte{data[keys[1]], nil, data[keys[2]]}
	i := 0
	err = cl.GetBatch(t.Context(), clusterNS, []block.Key{keys[1], missing, keys[2]}, func(f client.Frame, r io.Reader) error {
		got, err := io.ReadAll(r)
		switch {
		case err != nil:
			return err
		case want[i] == nil && !f.Missing:
			return fmt.Errorf("frame %d: unknown key not flagged missing", i)
		case want[i] != nil && (f.Missing || f.Tier != client.TierRemote || !bytes.Equal(got, want[i])):
			return fmt.Errorf("frame %d: missing %v, tier %d, %d bytes", i, f.Missing, f.Tier, len(got))
		}
		i++
		return nil
	})
	if err != nil || i != 3 {
		t.Fatalf("batch get on c: %v after %d frames", err, i)
	}
	// The cluster prefix query: A holds the whole chain.
	ms, ok := b.query(t, append(slices.Clone(keys), chainKeys(t, 1, 9)...))
	if !ok || len(ms) == 0 || ms[0].Name != "a" || ms[0].PrefixLen != 4 {
		t.Fatalf("query: %+v", ms)
	}
	// A block put with 3 replicas gets them.
	k := chainKeys(t, 1, 2)[0]
	data[k] = testData(7, 100_000)
	b.put(t, k, data[k], 3)
	waitFor(t, 15*time.Second, "3 replicas", func() string {
		if hs, _ := a.holders(t, k); len(hs) != 3 {
			return fmt.Sprintf("holders %v", hs)
		}
		return ""
	})
	// Bad input is a 4xx, not a crash.
	if st, _, _ := b.do(t, "PUT", "/v1/blocks/"+k.String(), []byte("x"), map[string]string{"X-Yuebing-Namespace": clusterNS, "X-Yuebing-Replicas": "0"}); st != 400 {
		t.Fatalf("replicas 0: %d", st)
	}
	if st := b.postJSON(t, "/v1/blocks/"+k.String()+"/replicas", map[string]any{"count": 300}, nil); st != 400 {
		t.Fatalf("count 300: %d", st)
	}
	if st, body, _ := b.do(t, "POST", "/internal/v1/report", []byte("garbage"), nil); st != 401 {
		t.Fatalf("internal API without the cluster token: %d %s", st, body)
	}
	// Lowering the count drops the extra replicas after the cooldown; the
	// count is accepted either way.
	if st := c.postJSON(t, "/v1/blocks/"+k.String()+"/replicas", map[string]any{"count": 1}, nil); st != 200 {
		t.Fatalf("set replicas: %d", st)
	}
}

// etcdServer starts Debian's etcd on free loopback ports.
func etcdServer(t *testing.T) string {
	t.Helper()
	url, _ := etcdProcess(t)
	return url
}

// etcdProcess is etcdServer that also returns the process.
func etcdProcess(t *testing.T) (string, *os.Process) {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not installed (apt-get install etcd-server); skipping the external-etcd cluster test")
	}
	client, peer := freePort(t), freePort(t)
	cmd := exec.Command(bin, "--name", "t", "--data-dir", t.TempDir(),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "t=http://"+peer, "--log-level", "error")
	cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="+goarch())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	waitFor(t, 30*time.Second, "etcd up", func() string {
		resp, err := http.Get("http://" + client + "/health")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return resp.Status
		}
		return ""
	})
	return "http://" + client, cmd.Process
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestClusterFailures(t *testing.T) {
	etcd := etcdServer(t)
	root := t.TempDir()
	nodes := map[string]*cnode{}
	for _, name := range []string{"a", "b", "c"} {
		nodes[name] = serveCluster(t, name, filepath.Join(root, name), "--etcd", etcd)
	}
	all := func() []*cnode { return []*cnode{nodes["a"], nodes["b"], nodes["c"]} }
	leader := waitCluster(t, all()...)
	var others []string
	for _, name := range []string{"a", "b", "c"} {
		if name != leader {
			others = append(others, name)
		}
	}
	p, q := nodes[others[0]], nodes[others[1]]

	// A replicated block, put on a node that does not lead.
	k := chainKeys(t, 1, 3)[0]
	want := testData(3, 150_000)
	p.put(t, k, want, 2)
	waitFor(t, 15*time.Second, "2 replicas", func() string {
		if hs, _ := p.holders(t, k); len(hs) != 2 {
			return fmt.Sprintf("holders %v", hs)
		}
		return ""
	})
	// P also keeps a chain, most of it demoted to SSD by its 2 MiB DRAM.
	chain := chainKeys(t, 12, 4)
	data := map[block.Key][]byte{}
	for i, c := range chain {
		data[c] = testData(200+i, 250_000)
		p.put(t, c, data[c], 0)
	}
	var onSSD []block.Key
	waitFor(t, 15*time.Second, "chain indexed, partly on SSD", func() string {
		onSSD = onSSD[:0]
		for _, c := range chain {
			hs, tiers := q.holders(t, c)
			if !slices.Equal(hs, []string{p.name}) {
				return fmt.Sprintf("%s held by %v", c, hs)
			}
			if slices.Equal(tiers[p.name], []string{"ssd"}) {
				onSSD = append(onSSD, c)
			}
		}
		if len(onSSD) == 0 {
			return "nothing on SSD yet"
		}
		return ""
	})

	// kill -9 the node the block was put on: reads go to the replica, and
	// the leader repairs the count on the third node.
	p.kill(t)
	if st, src := q.get(t, k, want); st != 200 {
		t.Fatalf("GET on %s after killing %s: %d from %q", q.name, p.name, st, src)
	}
	waitFor(t, 20*time.Second, "replica count repaired", func() string {
		hs, _ := q.holders(t, k)
		if len(hs) != 2 || slices.Contains(hs, p.name) {
			return fmt.Sprintf("holders %v", hs)
		}
		return ""
	})
	// The restarted node rejoins and its SSD blocks are back in the index.
	p = p.restart(t)
	nodes[p.name] = p
	waitFor(t, 20*time.Second, "SSD blocks back in the index", func() string {
		for _, c := range onSSD {
			if hs, _ := q.holders(t, c); !slices.Contains(hs, p.name) {
				return fmt.Sprintf("%s held by %v", c, hs)
			}
		}
		return ""
	})
	for _, c := range onSSD {
		if st, _ := q.get(t, c, data[c]); st != 200 {
			t.Fatalf("GET of an SSD block of the restarted node: %d", st)
		}
	}
	if testing.Short() {
		return
	}

	// kill -9 the leader: another is elected and rebuilds the same index
	// from the nodes' full states.
	before, ok := q.query(t, chain)
	if !ok || len(before) == 0 {
		t.Fatalf("query before: %+v", before)
	}
	old := nodes[leader]
	oldStatus, _ := q.status(t)
	old.kill(t)
	waitFor(t, 30*time.Second, "new leader with the same answers", func() string {
		st, ok := q.status(t)
		if !ok || !st.HasLeader || st.Leader.Name == old.name || st.Leader.Term <= oldStatus.Leader.Term {
			return fmt.Sprintf("leader %+v", st.Leader)
		}
		after, ok := q.query(t, chain)
		if !ok {
			return "no query answer"
		}
		var want []match
		for _, m := range before {
			if m.Name != old.name {
				want = append(want, m)
			}
		}
		if fmt.Sprint(after) != fmt.Sprint(want) {
			return fmt.Sprintf("query %v, before %v", after, want)
		}
		return ""
	})
	if st, _ := q.get(t, k, want); st != 200 {
		t.Fatalf("GET of the replicated block after the leader died: %d", st)
	}
}

// respCall sends one command to a RESP server and returns its reply: the
// line of a simple reply, an integer or an error, the bytes of a bulk
// string, "(nil)" for a null.
func respCall(t *testing.T, addr string, args ...string) string {
	t.Helper()
	c, r := dialRESP(t, addr)
	defer c.Close()
	var req bytes.Buffer
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%v: %v", args[0], err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return "(nil)"
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("%v: %v", args[0], err)
	}
	return string(b[:n])
}

// redisCLI runs Debian's redis-cli against addr and returns its output,
// trimmed (raw: a value, an integer, OK, or nothing for a null).
func redisCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed (apt-get install redis-tools)")
	}
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.CommandContext(t.Context(), bin, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestClusterRESPKeys: the nodes' Redis front ends are one keyspace: a key
// set through one reads the same through another, and SET, DEL, EXPIRE and
// PERSIST through any act on the one key.
func TestClusterRESPKeys(t *testing.T) {
	root := t.TempDir()
	a := serveCluster(t, "a", filepath.Join(root, "a"), "--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0")
	b := serveCluster(t, "b", filepath.Join(root, "b"), "--etcd", a.banner["etcd"], "--resp-listen", "127.0.0.1:0")
	waitCluster(t, a, b)
	ra, rb := strings.TrimPrefix(a.banner["resp"], "redis://"), strings.TrimPrefix(b.banner["resp"], "redis://")
	if ra == "" || rb == "" {
		t.Fatalf("no RESP listeners in the banners: %v %v", a.banner, b.banner)
	}

	// Members advertise their bound RESP addresses.
	if st, ok := b.status(t); !ok || len(st.Members) != 2 || st.Members[0].Addrs.RESP != ra || st.Members[1].Addrs.RESP != rb {
		t.Errorf("members' RESP addresses: %+v, want %s and %s", st.Members, ra, rb)
	}
	v1, v2 := string(testData(1, 300_000)), string(testData(2, 120_000))
	if got := respCall(t, ra, "SET", "chunk@1", v1); got != "+OK" {
		t.Fatalf("SET on a: %q", got)
	}
	if got := respCall(t, ra, "SET", "chunk@2", "short", "EX", "100"); got != "+OK" {
		t.Fatalf("SET EX on a: %q", got)
	}
	checks := []struct {
		args []string
		want string
	}{
		{[]string{"GET", "chunk@1"}, v1},
		{[]string{"EXISTS", "chunk@1", "chunk@2", "missing"}, ":2"},
		{[]string{"STRLEN", "chunk@1"}, fmt.Sprintf(":%d", len(v1))},
		{[]string{"TYPE", "chunk@1"}, "+string"},
		{[]string{"TTL", "chunk@1"}, ":-1"},
		{[]string{"GETRANGE", "chunk@1", "0", "9"}, v1[:10]},
		{[]string{"GET", "missing"}, "(nil)"},
		{[]string{"TTL", "missing"}, ":-2"},
	}
	for _, c := range checks {
		if got := respCall(t, rb, c.args...); got != c.want {
			t.Errorf("%v on b = %.40q, want %.40q", c.args, got, c.want)
		}
	}
	if got := respCall(t, rb, "TTL", "chunk@2"); !strings.HasPrefix(got, ":") {
		t.Errorf("TTL on b = %q", got)
	} else if left, _ := strconv.Atoi(got[1:]); left < 90 || left > 100 {
		t.Errorf("TTL of a key with 100 s left, on b = %d", left)
	}
	// The key changes on a: b reads the new value, then none.
	if got := respCall(t, ra, "SET", "chunk@1", v2); got != "+OK" {
		t.Fatalf("second SET on a: %q", got)
	}
	if got := respCall(t, rb, "GET", "chunk@1"); got != v2 {
		t.Fatalf("GET on b after the key changed on a: %.40q, want the new value", got)
	}
	if got := respCall(t, ra, "DEL", "chunk@1"); got != ":1" {
		t.Fatalf("DEL on a: %q", got)
	}
	if got := respCall(t, rb, "GET", "chunk@1"); got != "(nil)" {
		t.Fatalf("GET on b after DEL on a: %.40q", got)
	}
	// One keyspace: a SET on b replaces a's value on both, a DEL on b
	// deletes a's key, EXPIRE and PERSIST on b change a's key.
	respCall(t, rb, "SET", "chunk@2", "from b")
	for _, addr := range []string{ra, rb} {
		if got := respCall(t, addr, "GET", "chunk@2"); got != "from b" {
			t.Fatalf("GET on %s after a SET on b of a's key: %q", addr, got)
		}
	}
	redisCLI(t, ra, "SET", "shared", "v1")
	if got := redisCLI(t, rb, "EXPIRE", "shared", "100"); got != "1" {
		t.Fatalf("redis-cli EXPIRE on b of a's key: %q", got)
	}
	if got := redisCLI(t, ra, "TTL", "shared"); got != "100" && got != "99" {
		t.Fatalf("redis-cli TTL on a after EXPIRE on b: %q", got)
	}
	if got := redisCLI(t, rb, "PERSIST", "shared"); got != "1" {
		t.Fatalf("redis-cli PERSIST on b of a's key: %q", got)
	}
	if got := redisCLI(t, ra, "TTL", "shared"); got != "-1" {
		t.Fatalf("redis-cli TTL on a after PERSIST on b: %q", got)
	}
	if got := redisCLI(t, rb, "EXISTS", "shared"); got != "1" {
		t.Fatalf("redis-cli EXISTS on b: %q", got)
	}
	if got := redisCLI(t, rb, "DEL", "shared"); got != "1" {
		t.Fatalf("redis-cli DEL on b of a's key: %q", got)
	}
	for _, addr := range []string{ra, rb} {
		if got := redisCLI(t, addr, "EXISTS", "shared"); got != "0" {
			t.Fatalf("redis-cli EXISTS on %s after DEL on b: %q", addr, got)
		}
	}
	// SET NX on b sees a's key.
	redisCLI(t, ra, "SET", "once", "a")
	if got := redisCLI(t, rb, "SET", "once", "b", "NX"); got != "" {
		t.Fatalf("SET NX on b of a's key: %q", got)
	}
	// Writes of one key on both nodes at once: afterwards both nodes read
	// the same value, one of the two written.
	for i := range 20 {
		key := fmt.Sprintf("race@%d", i)
		var wg sync.WaitGroup
		wg.Go(func() { respCall(t, ra, "SET", key, "a") })
		wg.Go(func() { respCall(t, rb, "SET", key, "b") })
		wg.Wait()
		ga, gb := respCall(t, ra, "GET", key), respCall(t, rb, "GET", key)
		if ga != gb || ga != "a" && ga != "b" {
			t.Fatalf("%s after SETs on a and b at once: %q on a, %q on b", key, ga, gb)
		}
	}
	if info := respCall(t, rb, "INFO", "stats"); !strings.Contains(info, "keyspace_remote_hits:") {
		t.Errorf("INFO on b has no keyspace_remote_hits: %.300q", info)
	}
	// A node told to keep to its own keys does not see the others'.
	c := serveCluster(t, "c", filepath.Join(root, "c"), "--etcd", a.banner["etcd"], "--resp-listen", "127.0.0.1:0", "--resp-local-only")
	waitCluster(t, a, b, c)
	respCall(t, ra, "SET", "chunk@3", "on a")
	if got := respCall(t, strings.TrimPrefix(c.banner["resp"], "redis://"), "GET", "chunk@3"); got != "(nil)" {
		t.Errorf("GET of another node's key on a --resp-local-only node: %q", got)
	}
}
