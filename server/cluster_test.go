package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/server/auth"
)

func TestClusterConfigValidate(t *testing.T) {
	f := func(name string, mutate func(*Config), wants ...string) {
		t.Helper()
		c := validConfig(t)
		mutate(&c)
		c.EnsureDefaults()
		err := c.Validate()
		if len(wants) == 0 {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			return
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v", name, err)
			return
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error lacks %q:\n%v", name, w, err)
			}
		}
	}
	f("alone", func(c *Config) {})
	f("embedded dev cluster", func(c *Config) { c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true })
	f("external etcd", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.Endpoints = "prod", "a", cluster.Endpoints{"http://h1:2379", "http://h2:2379"}
	})
	f("etcd without a cluster", func(c *Config) { c.Cluster.Endpoints = cluster.Endpoints{"http://h1:2379"} }, "cluster.name", "--cluster")
	f("no etcd", func(c *Config) { c.Cluster.Cluster = "x" }, "cluster.etcd", "--etcd-embedded")
	f("bad names and URL", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.Endpoints = "a/b", "no spaces", cluster.Endpoints{"h1:2379"}
	}, "cluster.name", "cluster.node_name", "cluster.etcd", "http://")
	f("no transfer listener", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Transfer.Listen = ""
	}, "transfer.listen")
	f("public without token or advertise", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.Endpoints = "prod", "a", cluster.Endpoints{"http://h1:2379"}
		c.HTTP.Listen, c.Transfer.Listen, c.Insecure = "0.0.0.0:8080", "0.0.0.0:7070", true
	}, "cluster.token_file", "cluster.advertise_http", "cluster.advertise_transfer")
	f("public with token and advertise", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.Endpoints = "prod", "a", cluster.Endpoints{"http://h1:2379"}
		c.HTTP.Listen, c.Transfer.Listen, c.Insecure = "0.0.0.0:8080", "0.0.0.0:7070", true
		c.Cluster.TokenFile, c.Cluster.AdvertiseHTTP, c.Cluster.AdvertiseTransfer = "/etc/t", "10.0.0.1:8080", "10.0.0.1:7070"
	})
	// The token derived from the cluster's name is public: with tenants'
	// tokens on it would open their blocks through the internal API.
	f("auth without a cluster token", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Auth.TokensFile = "/etc/yuebing/tokens.yaml"
	}, "cluster.token_file", "auth.tokens_file")
	f("auth with a cluster token", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Auth.TokensFile, c.Cluster.TokenFile = "/etc/yuebing/tokens.yaml", "/etc/t"
	})
	f("embedded etcd off loopback without a token", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Cluster.EtcdEmbeddedListen, c.Cluster.EtcdEmbeddedPeerListen = "0.0.0.0:2379", "10.0.0.1:2380"
	}, "cluster.etcd_embedded_listen", "cluster.etcd_embedded_peer_listen")
	f("embedded etcd off loopback with a token", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Cluster.EtcdEmbeddedListen, c.Cluster.TokenFile = "0.0.0.0:2379", "/etc/t"
	})
	f("bad knobs", func(c *Config) {
		c.Cluster.Cluster, c.Cluster.NodeName, c.Cluster.EtcdEmbedded = "dev", "a", true
		c.Cluster.Admit, c.Cluster.Replication.MaxReplicas, c.Cluster.LeaseTTL = "sometimes", 300, -1
	}, "cluster.admit", "cluster.max_replicas", "cluster.lease_ttl")
}

func TestClusterToken(t *testing.T) {
	c := validConfig(t)
	c.Cluster.Cluster = "dev"
	if tok, err := c.clusterToken(); err != nil || !strings.Contains(tok, "dev") {
		t.Fatalf("dev token %q, %v", tok, err)
	}
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte("short\n"), 0o600)
	c.Cluster.TokenFile = p
	if _, err := c.clusterToken(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("short token: %v", err)
	}
	os.WriteFile(p, []byte("0123456789abcdef0123\n"), 0o600)
	if tok, err := c.clusterToken(); err != nil || tok != "0123456789abcdef0123" {
		t.Fatalf("token %q, %v", tok, err)
	}
}

// A node that runs alone answers the cluster endpoints with 404 no_cluster
// and refuses replica counts above 1.
func TestClusterEndpointsAlone(t *testing.T) {
	n := startNode(t, nodeOpts{})
	h := n.api.Handler()
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "/v1/cluster", nil),
		httptest.NewRequest("POST", "/v1/cluster/query", strings.NewReader(`{"keys":[]}`)),
		httptest.NewRequest("POST", "/v1/blocks/"+strings.Repeat("ab", 32)+"/replicas", strings.NewReader(`{"count":2}`)),
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 404 || !strings.Contains(w.Body.String(), "no_cluster") {
			t.Errorf("%s %s: %d %s", r.Method, r.URL.Path, w.Code, w.Body)
		}
	}
	r := httptest.NewRequest("PUT", "/v1/blocks/"+strings.Repeat("ab", 32), strings.NewReader("x"))
	r.Header.Set(HeaderNamespace, "acme/m")
	r.Header.Set(HeaderReplicas, "2")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "needs a cluster") {
		t.Fatalf("replicas 2 alone: %d %s", w.Code, w.Body)
	}
}

// clusterTestNode is an API in a cluster: a real store, a cluster node on
// an embedded etcd, served on a loopback listener with the internal API,
// as serve mounts them. seen records the Authorization of every request.
type clusterTestNode struct {
	*testNode
	node *cluster.Node
	mu   sync.Mutex
	seen []string
}

func (n *clusterTestNode) authorizations() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.seen)
}

// startClusterNode starts a node named name on the etcd at etcd; each of
// with, if any, may change its options before it starts.
func startClusterNode(t *testing.T, etcd, name string, with ...func(*cluster.Options, *APIOptions)) *clusterTestNode {
	t.Helper()
	dir := t.TempDir()
	store := newTestStore(t, dir, 16<<20)
	toks, err := auth.Parse([]byte(testTokens))
	if err != nil {
		t.Fatal(err)
	}
	copts := cluster.Options{
		Cluster: "test", NodeName: name, Endpoints: []string{etcd}, Token: "test-cluster-token-0001",
		TransferListen: "127.0.0.1:0", LeaseTTL: 2 * time.Second, ReportInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	aopts := APIOptions{Store: store, Tokens: toks, NodeName: name, ContextsFile: filepath.Join(dir, "contexts.json")}
	for _, w := range with {
		w(&copts, &aopts)
	}
	cn, err := cluster.New(copts, store)
	if err != nil {
		t.Fatal(err)
	}
	aopts.Cluster = cn
	api, err := NewAPI(aopts)
	if err != nil {
		t.Fatal(err)
	}
	n := &clusterTestNode{node: cn}
	h := withInternal(api.Handler(), cn)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		n.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	n.testNode = &testNode{api: api, store: store, srv: srv, dir: dir}
	t.Cleanup(func() {
		cn.Close()
		n.close()
	})
	if err := cn.Start(t.Context(), cluster.Addrs{HTTP: srv.Listener.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	return n
}

// The console's cluster page reads every member's figures through one
// node. That node must not pass the admin's token on: a member record
// written into etcd by anyone (here, unsigned, as etcdctl would) would
// name the address that receives it. Forged members are not asked at all,
// and genuine ones are asked with the cluster token alone.
func TestClusterNodesKeepTheClientsToken(t *testing.T) {
	e, err := cluster.StartEmbedded(cluster.EmbedOptions{Dir: t.TempDir(), ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	a := startClusterNode(t, e.Endpoint(), "a")
	b := startClusterNode(t, e.Endpoint(), "b")

	var (
		mu   sync.Mutex
		fake []string
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fake = append(fake, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(sink.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	evil, _ := json.Marshal(cluster.Member{ID: 7, Name: "evil", Addrs: cluster.Addrs{HTTP: sink.Listener.Addr().String(), Transfer: sink.Listener.Addr().String()}})
	if _, err := cli.Put(t.Context(), "/yuebing/test/members/7", string(evil)); err != nil {
		t.Fatal(err)
	}
	// b is a member, and the forged record is loaded: taken as a member
	// (the defect) or ignored.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ms := a.node.Members()
		hasB := slices.ContainsFunc(ms, func(m cluster.Member) bool { return m.Name == "b" })
		if hasB && (len(ms) == 3 || a.node.Counters().BadRecords > 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members %+v, %d bad records", ms, a.node.Counters().BadRecords)
		}
		time.Sleep(20 * time.Millisecond)
	}

	r := do(t, a.testNode, "GET", "/v1/cluster/nodes", tokAdmin, nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/cluster/nodes: %d %s", r.status, r.body)
	}
	var got struct {
		Nodes []memberStats `json:"nodes"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got.Nodes {
		names = append(names, m.Name)
		if m.Name == "b" && (m.Stats == nil || m.Stats.Node != "b" || m.Error != "") {
			t.Errorf("b's figures: %+v, error %q", m.Stats, m.Error)
		}
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("nodes %q, want a and b", names)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fake) > 0 {
		t.Errorf("the forged member's address received %q", fake)
	}
	for _, s := range b.authorizations() {
		if strings.Contains(s, tokAdmin) {
			t.Errorf("b received the admin's token: %q", s)
		}
	}
}
