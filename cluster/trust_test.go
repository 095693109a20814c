package cluster

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/yuebing/yuebing/block"
)

// sink is an HTTP listener on 127.0.0.1 that records every request: the
// address a forged record names.
type sink struct {
	addr string
	mu   sync.Mutex
	reqs []string // method, path and Authorization of each request
	raw  []sunk
}

// sunk is a request as the sink received it.
type sunk struct {
	method, path string
	header       http.Header
	body         []byte
}

func newSink(t *testing.T) *sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Method+" "+r.URL.Path+" Authorization: "+r.Header.Get("Authorization"))
		s.raw = append(s.raw, sunk{r.Method, r.URL.Path, r.Header.Clone(), body})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *sink) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// etcdPut writes a key as etcdctl would: anyone who can reach etcd.
func etcdPut(t *testing.T, endpoint, key, val string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(t.Context(), key, val); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A member record written into etcd by someone without the cluster token,
// plain or signed with another token, is ignored and counted: deletes and
// name operations, which carry the cluster token and tenants' key names,
// never reach the address it names.
func TestForgedMemberGetsNothing(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	c.waitFormed()
	n := c.nodes[0].n
	fake := newSink(t)
	evil := Member{ID: 7, Name: "evil", Addrs: Addrs{HTTP: fake.addr, Transfer: fake.addr}, Started: time.Now()}
	etcdPut(t, c.etcd.Endpoint(), n.key("members", "7"), mustJSON(t, evil))
	other := &Node{recordKey: deriveKey("another-token", purposeRecords)}
	evil.ID, evil.Name = 8, "evil2"
	val, err := other.seal(n.key("members", "8"), evil)
	if err != nil {
		t.Fatal(err)
	}
	etcdPut(t, c.etcd.Endpoint(), n.key("members", "8"), val)
	// Either the forged records were taken as members (the defect) or
	// both were ignored.
	eventually(t, 10*time.Second, func() error {
		if len(n.Members()) == 1 && n.Counters().BadRecords < 2 {
			return errors.New("the forged records are not loaded yet")
		}
		return nil
	})
	if _, err := n.Deleted(t.Context(), testKey(1)); err != nil {
		t.Errorf("Deleted: %v", err)
	}
	if _, _, err := n.ForgetName(t.Context(), "acme/m", "secret-name", 1); err != nil {
		t.Errorf("ForgetName: %v", err)
	}
	if got := fake.requests(); len(got) > 0 {
		t.Errorf("the forged member's address received %d requests: %q", len(got), got)
	}
	if ms := n.Members(); len(ms) != 1 || ms[0].ID != n.ID() {
		t.Errorf("members %+v, want the node alone", ms)
	}
	if got := n.Counters().BadRecords; got != 2 {
		t.Errorf("bad records %d, want 2", got)
	}
}

// A campaign written ahead of the nodes' by someone without the cluster
// token names no leader: the node knows none, and its lookups and reports
// never reach the address it names.
func TestForgedLeaderGetsNothing(t *testing.T) {
	c := &testCluster{t: t, etcd: startEtcd(t)}
	fake := newSink(t)
	pfx := "/yuebing/test/"
	etcdPut(t, c.etcd.Endpoint(), pfx+"election/1234abcd", mustJSON(t, LeaderInfo{ID: 9, Name: "evil", HTTP: fake.addr}))
	n := c.add("n0").n
	eventually(t, 10*time.Second, func() error {
		if _, ok := n.Leader(); !ok && n.Counters().BadRecords == 0 {
			return errors.New("the forged campaign is not loaded yet")
		}
		return nil
	})
	if li, ok := n.Leader(); ok {
		t.Errorf("leader %+v from a forged campaign", li)
	}
	if _, err := n.Holders(t.Context(), []block.Key{testKey(1)}); !errors.Is(err, ErrNoLeader) {
		t.Errorf("Holders: %v, want ErrNoLeader", err)
	}
	if got := fake.requests(); len(got) > 0 {
		t.Errorf("the forged leader's address received %d requests: %q", len(got), got)
	}
}

func TestSealedRecords(t *testing.T) {
	a := &Node{recordKey: deriveKey("token-a", purposeRecords)}
	b := &Node{recordKey: deriveKey("token-b", purposeRecords)}
	m := Member{ID: 3, Name: "n3", Addrs: Addrs{HTTP: "127.0.0.1:1"}}
	val, err := a.seal("/yuebing/x/members/3", m)
	if err != nil {
		t.Fatal(err)
	}
	var got Member
	if err := a.unseal("/yuebing/x/members/3", []byte(val), &got); err != nil || got.Name != "n3" {
		t.Fatalf("unseal: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name  string
		n     *Node
		where string
		val   string
	}{
		{"other token", b, "/yuebing/x/members/3", val},
		{"other key", a, "/yuebing/x/members/4", val},
		{"plain record", a, "/yuebing/x/members/3", `{"id":3,"name":"n3"}`},
		{"not JSON", a, "/yuebing/x/members/3", "\x00"},
		{"bad MAC", a, "/yuebing/x/members/3", `{"record":{"id":3},"mac":"zz"}`},
	} {
		if err := tc.n.unseal(tc.where, []byte(tc.val), &got); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v, want ErrBadRecord", tc.name, err)
		}
	}
}

// With a root password the embedded etcd serves nodes that hold the
// cluster token and nobody else; a data directory made with another token
// is refused at start.
func TestEmbeddedEtcdAuth(t *testing.T) {
	const token = "test-cluster-token"
	dir := t.TempDir()
	start := func(password string) (*Embedded, error) {
		return StartEmbedded(EmbedOptions{Dir: dir, ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0", RootPassword: password})
	}
	e, err := start(EtcdPassword(token))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if e, err := start(EtcdPassword("another-token")); err == nil {
		e.Close()
		t.Fatal("the etcd of another token's cluster started")
	}
	if e, err = start(EtcdPassword(token)); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(e.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(t.Context(), "/yuebing/test/members/7", "{}"); err == nil {
		t.Error("a client without the password wrote to the embedded etcd")
	}
	if _, err := cli.Get(t.Context(), "/yuebing/test/", clientv3.WithPrefix()); err == nil {
		t.Error("a client without the password read the embedded etcd")
	}
	c := &testCluster{t: t, etcd: e, opts: func(o *Options) { o.EtcdUsername, o.EtcdPassword = "root", EtcdPassword(o.Token) }}
	c.add("n0")
	c.add("n1")
	c.waitFormed()
}

// FuzzUnseal: any etcd value is a verified record or ErrBadRecord, never a
// panic, and only values sealed with the token verify.
func FuzzUnseal(f *testing.F) {
	n := &Node{recordKey: deriveKey("fuzz-token", purposeRecords)}
	const where = "/yuebing/f/members/1"
	good, err := n.seal(where, Member{ID: 1, Name: "n1", Addrs: Addrs{HTTP: "127.0.0.1:1"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(good))
	f.Add([]byte(`{"id":1,"name":"n1"}`))
	f.Add([]byte(`{"record":null,"mac":""}`))
	f.Add([]byte(`{"record":{"id":1},"mac":"00"}`))
	f.Fuzz(func(t *testing.T, val []byte) {
		var m Member
		err := n.unseal(where, val, &m)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("unseal: %v, want ErrBadRecord", err)
			}
			return
		}
		// It verified: its record must be one the token signed.
		var s sealed
		if json.Unmarshal(val, &s) != nil || !hmacEqualHex(s.MAC, recordMAC(n.recordKey, where, s.Record)) {
			t.Fatalf("%q verified without the token's MAC", val)
		}
	})
}

func hmacEqualHex(h string, mac []byte) bool {
	return h == hex.EncodeToString(mac)
}

// Whoever stands at a member's address (one that took over the port of a
// node that died, or listens on the wire) learns no credential from the
// requests nodes send: they are signed with the token, not carrying it;
// and what it captured does not pass with another body, or late.
func TestInternalRequestsCarryNoToken(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	c.waitFormed()
	n := c.nodes[0].n
	const token = "test-cluster-token"
	squat := newSink(t)
	val, err := n.seal(n.key("members", "7"), Member{ID: 7, Name: "gone", Addrs: Addrs{HTTP: squat.addr, Transfer: squat.addr}})
	if err != nil {
		t.Fatal(err)
	}
	etcdPut(t, c.etcd.Endpoint(), n.key("members", "7"), val)
	eventually(t, 10*time.Second, func() error {
		if len(n.Members()) != 2 {
			return fmt.Errorf("%d members", len(n.Members()))
		}
		return nil
	})
	n.Deleted(t.Context(), testKey(1))
	n.ForgetName(t.Context(), "acme/m", "k", 1)
	squat.mu.Lock()
	got := slices.Clone(squat.raw)
	squat.mu.Unlock()
	if len(got) == 0 {
		t.Fatal("the member's address received nothing")
	}
	for _, r := range got {
		for name, vs := range r.header {
			for _, v := range vs {
				if strings.Contains(v, token) {
					t.Errorf("%s %s carries the cluster token in %s: %q", r.method, r.path, name, v)
				}
			}
		}
	}
	// A captured request, sent to a node with another body: refused.
	r := got[0]
	send := func(body []byte, hdr http.Header) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), r.method, "http://"+c.nodes[0].addr+r.path, strings.NewReader(string(body)))
		req.Header = hdr
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := send([]byte(`{"keys":[]}`), r.header.Clone()); st != http.StatusUnauthorized {
		t.Errorf("a captured request with another body: %d, want 401", st)
	}
	// Another path under the same signature: refused.
	r.path = "/internal/v1/has"
	if st := send(r.body, r.header.Clone()); st != http.StatusUnauthorized {
		t.Errorf("a captured request to another path: %d, want 401", st)
	}
}

func TestAuthenticate(t *testing.T) {
	n := &Node{opts: Options{Token: "tok-0123456789abcdef"}, requestKey: deriveKey("tok-0123456789abcdef", purposeRequests)}
	other := &Node{requestKey: deriveKey("another-token", purposeRequests)}
	now := time.Now()
	signed := func(signer *Node, body string) *http.Request {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:1/internal/v1/has", strings.NewReader(body))
		signer.sign(req, []byte(body))
		return req
	}
	f := func(name string, req *http.Request, at time.Time, want error) {
		t.Helper()
		err := n.authenticate(req, at, 16)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	f("signed", signed(n, `{"keys":[]}`), now, nil)
	f("late", signed(n, `{}`), now.Add(MaxClockSkew+time.Second), ErrUnauthorized)
	f("early", signed(n, `{}`), now.Add(-MaxClockSkew-time.Second), ErrUnauthorized)
	f("another token", signed(other, `{}`), now, ErrUnauthorized)
	f("body over the bound", signed(n, strings.Repeat("x", 17)), now, ErrBadRequest)
	req := signed(n, `{}`)
	req.Header.Set(HeaderBodySHA256, strings.Repeat("0", 64))
	f("another digest", req, now, ErrUnauthorized)
	req = signed(n, `{}`)
	req.Body = io.NopCloser(strings.NewReader(`{"x":1}`))
	f("another body", req, now, ErrUnauthorized)
	for _, h := range []string{"", "Bearer wrong", "Yuebing-HMAC", "Yuebing-HMAC x:y", "Yuebing-HMAC 1:zz", "Basic abc"} {
		req := signed(n, `{}`)
		req.Header.Set("Authorization", h)
		f(fmt.Sprintf("Authorization %q", h), req, now, ErrUnauthorized)
	}
	req = signed(n, `{}`)
	req.Header.Set("Authorization", "Bearer tok-0123456789abcdef")
	f("the token itself", req, now, nil)
	// The body reads as it was sent after the check.
	req = signed(n, `{"keys":[]}`)
	if err := n.authenticate(req, now, 16); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(req.Body); string(b) != `{"keys":[]}` {
		t.Errorf("body after the check %q", b)
	}
}
