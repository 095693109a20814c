package resp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/yuebing/yuebing/tier"
)

// TestConcurrentReplace: while writers replace one key's value, readers
// always get one whole value, never an error or nil.
func TestConcurrentReplace(t *testing.T) {
	s := startServer(t, Options{})
	sizes := []int{100, 4096, smallArg + 10, 300 << 10}
	seed := dial(t, s.addr)
	if got := seed.do("SET", "k", strings.Repeat("a", 10)); got != "+OK\r\n" {
		t.Fatal(got)
	}
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	for w := range 3 {
		wg.Go(func() {
			c := dial(t, s.addr)
			for i := range rounds {
				n := sizes[(i+w)%len(sizes)]
				v := strings.Repeat(string(rune('b'+w)), n)
				if got := c.do("SET", "k", v); got != "+OK\r\n" {
					t.Errorf("SET: %q", got)
					return
				}
			}
		})
	}
	var reads atomic.Int64
	var rwg sync.WaitGroup
	for range 3 {
		rwg.Go(func() {
			c := dial(t, s.addr)
			for !stop.Load() {
				got := c.do("GET", "k")
				reads.Add(1)
				var n int
				if _, err := fmt.Sscanf(got, "$%d\r\n", &n); err != nil || n <= 0 {
					t.Errorf("GET during replacement: %.40q", got)
					return
				}
				body := got[strings.Index(got, "\n")+1 : len(got)-2]
				if len(body) != n || strings.Count(body, body[:1]) != n {
					t.Errorf("GET returned a torn value of %d bytes", n)
					return
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	rwg.Wait()
	if st := s.Stats(); st.Keys != 1 || st.ErrorReplies != 0 {
		t.Errorf("after the race: %d keys, %d errors", st.Keys, st.ErrorReplies)
	}
	// Every replaced generation is deleted: one block is left, none if
	// the last value written is inline.
	want := 1
	if e := s.ks.get(compose(nil, s.ks.space("default/redis"), []byte("k"))); e != nil && e.inline {
		want = 0
	}
	waitFor(t, 5*time.Second, func() bool { return s.store.Len() == want })
	t.Logf("%d reads", reads.Load())
}

// TestEviction: writing far more than the store holds evicts, like Redis's
// allkeys-lru, instead of failing; only a value larger than every tier is
// refused, with -OOM.
func TestEviction(t *testing.T) {
	st := testStore(t, 8<<20, 16<<20)
	t.Cleanup(func() { st.Close() })
	s := startServer(t, Options{Store: st})
	c := dial(t, s.addr)
	v := strings.Repeat("e", 1<<20)
	n := 64
	for i := range n {
		if got := c.do("SET", fmt.Sprint("key", i), v); got != "+OK\r\n" {
			t.Fatalf("SET %d: %q", i, got)
		}
	}
	var keys int
	fmt.Sscanf(c.do("DBSIZE"), ":%d", &keys)
	if keys <= 0 || keys >= n {
		t.Errorf("DBSIZE = %d after %d 1 MiB SETs into 24 MiB", keys, n)
	}
	if got := c.do("GET", fmt.Sprint("key", n-1)); len(got) != 1<<20+len("$1048576\r\n\r\n") {
		t.Errorf("the last key: %d bytes", len(got))
	}
	if got := c.do("EXISTS", "key0"); got != ":0\r\n" {
		t.Errorf("the first key was not evicted: %q", got)
	}
	info := c.do("INFO", "stats")
	if strings.Contains(info, "evicted_keys:0\r\n") || !strings.Contains(info, "evicted_keys:") {
		t.Errorf("INFO stats: %q", info)
	}
	// Every table entry's block is in the store and every Redis block in
	// the store is in the table, give or take blocks being deleted.
	waitFor(t, 5*time.Second, func() bool { return int(s.Stats().Keys) == st.Len() })

	huge := strings.Repeat("h", 20<<20)
	if got := c.do("SET", "huge", huge); got != "-OOM value of 20971520 bytes is larger than the store can hold\r\n" {
		t.Errorf("SET of 20 MiB into tiers of at most 8 MiB: %q", got)
	}
	if got := c.do("GET", fmt.Sprint("key", n-1)); len(got) != 1<<20+len("$1048576\r\n\r\n") {
		t.Errorf("after -OOM, the last key: %d bytes", len(got))
	}
}

// TestRestart: SSD blocks survive a restart with their records: keys,
// values, SET-time deadlines and the latest of several generations come
// back; DRAM-only metadata whose payload did not survive does not.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	// Both servers read one clock, moved by hand: "gone" expires between
	// them without the test waiting for it.
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	st := openStore(t, dir, 16<<20, 64<<20)
	s := startServer(t, Options{Store: st, Now: clock})
	c := dial(t, s.addr)
	big := strings.Repeat("B", 200<<10)
	for _, args := range [][]string{
		{"SET", "plain", "v1"},
		{"SET", "plain", "v2"},
		{"SET", "ttl", "t", "EX", "1000"},
		{"SET", "big", big},
		{"SET", "bigttl", big, "EX", "1000"}, // streamed, then its deadline
		{"SET", "bigttl", big, "KEEPTTL"},
		{"SET", "chunk:kv_bytes", big},
		{"SET", "chunk:metadata", "md"},
		{"SET", "gone", "x", "PX", "1"},
	} {
		if got := c.do(args...); got != "+OK\r\n" {
			t.Fatalf("%q: %q", args, got)
		}
	}
	now.Add(int64(2 * time.Millisecond)) // "gone" is past its deadline
	ctx := context.Background()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Simulate a crash between writing a new generation and deleting the
	// old one: put an older generation of "plain" back.
	old := record{gen: 1, ns: "default/redis", name: "plain"}
	if _, err := st.Put(ctx, blockKey(old.ns, []byte(old.name), old.gen), []byte("v0"), tier.PutOptions{Meta: old.appendTo(nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := openStore(t, dir, 16<<20, 64<<20)
	t.Cleanup(func() { st2.Close() })
	s2 := startServer(t, Options{Store: st2, Now: clock})
	c2 := dial(t, s2.addr)
	f := func(want string, args ...string) {
		t.Helper()
		if got := c2.do(args...); got != want {
			t.Errorf("%q after restart = %.60q, want %.60q", args, got, want)
		}
	}
	f("$2\r\nv2\r\n", "GET", "plain")
	f(":1000\r\n", "TTL", "ttl")
	f(fmt.Sprintf(":%d\r\n", len(big)), "STRLEN", "big")
	f(":1000\r\n", "TTL", "bigttl")
	f(fmt.Sprintf("$%d\r\n%s\r\n", len(big), big), "GET", "bigttl")
	f("$2\r\nmd\r\n", "GET", "chunk:metadata")
	f(":0\r\n", "EXISTS", "gone")
	f(":6\r\n", "DBSIZE")
	if got := sorted(strings.Fields(strings.NewReplacer("\r\n", " ", "$", " ").Replace(c2.do("KEYS", "*")))); !strings.Contains(strings.Join(got, ","), "big,bigttl,chunk:kv_bytes,chunk:metadata,plain,ttl") {
		t.Errorf("KEYS after restart: %q", got)
	}
	// The old generations and the expired key's block were deleted.
	waitFor(t, 5*time.Second, func() bool { return st2.Len() == 6 })
}

// TestAuthTenants: tokens select tenants; identical key names of two
// tenants are different keys; admin operations need an admin.
func TestAuthTenants(t *testing.T) {
	tokens := writeTokens(t, `
alpha-token-0123456789: {tenant: alpha, role: tenant}
beta-token-01234567890: {tenant: beta, role: tenant}
ops-token-012345678901: {tenant: ops, role: admin}
`)
	s := startServer(t, Options{Tokens: tokens})
	a, b, o := dial(t, s.addr), dial(t, s.addr), dial(t, s.addr)
	steps := []struct {
		c    *rawConn
		args []string
		want string
	}{
		{a, []string{"GET", "k"}, "-NOAUTH Authentication required.\r\n"},
		{a, []string{"PING"}, "-NOAUTH Authentication required.\r\n"},
		{a, []string{"HELLO", "2"}, "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"},
		{a, []string{"AUTH", "wrong-token-0123456789"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{a, []string{"AUTH", "beta", "alpha-token-0123456789"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{a, []string{"AUTH", "alpha-token-0123456789"}, "+OK\r\n"},
		{a, []string{"SET", "k", "from-alpha"}, "+OK\r\n"},
		{b, []string{"AUTH", "default", "beta-token-01234567890"}, "+OK\r\n"},
		{b, []string{"GET", "k"}, "$-1\r\n"},
		{b, []string{"SET", "k", "from-beta"}, "+OK\r\n"},
		{b, []string{"SET", "j", "j"}, "+OK\r\n"},
		{a, []string{"GET", "k"}, "$10\r\nfrom-alpha\r\n"},
		{a, []string{"DBSIZE"}, ":1\r\n"},
		{b, []string{"DBSIZE"}, ":2\r\n"},
		{a, []string{"KEYS", "*"}, "*1\r\n$1\r\nk\r\n"},
		{a, []string{"FLUSHDB"}, "-NOPERM this user has no permissions to run the 'flushdb' command\r\n"},
		{a, []string{"FLUSHALL"}, "-NOPERM this user has no permissions to run the 'flushall' command\r\n"},
		// An admin token names the tenant it acts for.
		{o, []string{"AUTH", "alpha", "ops-token-012345678901"}, "+OK\r\n"},
		{o, []string{"GET", "k"}, "$10\r\nfrom-alpha\r\n"},
		{o, []string{"FLUSHDB"}, "+OK\r\n"},
		{a, []string{"GET", "k"}, "$-1\r\n"},
		{b, []string{"GET", "k"}, "$9\r\nfrom-beta\r\n"},
		{o, []string{"FLUSHALL"}, "+OK\r\n"},
		{b, []string{"DBSIZE"}, ":0\r\n"},
	}
	for i, st := range steps {
		if got := st.c.do(st.args...); got != st.want {
			t.Errorf("step %d %q = %q, want %q", i, st.args, got, st.want)
		}
	}
	// HELLO with AUTH switches to RESP3 and authenticates at once.
	h := dial(t, s.addr)
	got := h.do("HELLO", "3", "AUTH", "default", "beta-token-01234567890", "SETNAME", "py")
	if !strings.HasPrefix(got, "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n") || !strings.Contains(got, "$5\r\nproto\r\n:3\r\n") {
		t.Errorf("HELLO 3 AUTH: %q", got)
	}
	for _, st := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", "nokey"}, "_\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "$2\r\npy\r\n"},
		{[]string{"CONFIG", "GET", "databases"}, "%1\r\n$9\r\ndatabases\r\n$1\r\n1\r\n"},
		{[]string{"HELLO", "2"}, ""},
		{[]string{"GET", "nokey"}, "$-1\r\n"},
	} {
		if got := h.do(st.args...); st.want != "" && got != st.want {
			t.Errorf("%q = %q, want %q", st.args, got, st.want)
		}
	}
}

// TestShutdown: Shutdown closes idle connections at once, lets a command
// in progress finish and answers it, and Serve returns nil.
func TestShutdown(t *testing.T) {
	st := testStore(t, 16<<20, 64<<20)
	t.Cleanup(func() { st.Close() })
	s, err := NewServer(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	idle, busy := dial(t, ln.Addr().String()), dial(t, ln.Addr().String())
	idle.do("PING")
	v := strings.Repeat("s", 1<<20)
	req := multibulk("SET", "k", v)
	busy.send(req[:len(req)/2])
	waitFor(t, 5*time.Second, func() bool { return st.Stats().Tiers[0].Used >= 1<<20 }) // streaming
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if !idle.closed() {
		t.Error("idle connection not closed")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a command in progress", err)
	case <-time.After(100 * time.Millisecond):
	}
	busy.send(req[len(req)/2:] + multibulk("GET", "k"))
	if got := busy.reply(); got != "+OK\r\n" {
		t.Errorf("the command in progress: %q", got)
	}
	if !busy.closed() {
		t.Error("busy connection not closed after its command")
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("still accepting")
	}

	// A command that never completes is cut off when ctx ends.
	s2 := startServer(t, Options{Store: st})
	stuck := dial(t, s2.addr)
	used := st.Stats().Tiers[0].Used
	stuck.send(multibulk("SET", "k2", v)[:100])
	// Inside the command: its value is being streamed into the store (bytes
	// read are counted before the command begins, so they do not say it).
	waitFor(t, 5*time.Second, func() bool { return st.Stats().Tiers[0].Used >= used+1<<20 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s2.Shutdown(ctx); err != context.DeadlineExceeded {
		t.Errorf("Shutdown with a stuck command: %v", err)
	}
	if !stuck.closed() {
		t.Error("stuck connection not closed")
	}
}

// TestExpiry: deadlines are enforced on access and by the background
// sweep, which gives the space back without anybody reading the key. It
// runs in a synctest bubble: the sleeps move the bubble's clock, which the
// deadlines and the sweep's ticker both read.
func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, ln := startBubbleServer(t, Options{})
		c := ln.dial(t)
		for _, args := range [][]string{
			{"SET", "a", "1", "PX", "1500"},
			{"SET", "b", "2", "EX", "10"},
			{"SET", "c", "3"},
		} {
			c.do(args...)
		}
		c.do("EXPIRE", "c", "1")
		if got := c.do("PTTL", "a"); got != ":1500\r\n" {
			t.Errorf("PTTL a = %q", got)
		}
		time.Sleep(2 * time.Second) // past a's and c's deadlines; the sweep ran
		synctest.Wait()
		if n := s.Stats().ExpiredKeys; n != 2 {
			t.Errorf("%d keys expired by the sweep, want 2", n)
		}
		if got := c.do("EXISTS", "a", "b", "c"); got != ":1\r\n" {
			t.Errorf("EXISTS = %q", got)
		}
		if got := c.do("TTL", "b"); got != ":8\r\n" {
			t.Errorf("TTL b = %q", got)
		}
		if st := s.Stats(); st.InlineKeys != 1 || st.InlineBytes != 1+int64(len("b"))+entryOverhead {
			t.Errorf("%d inline keys of %d bytes, want 1 (b)", st.InlineKeys, st.InlineBytes)
		}
		// Repeated EXPIREs leave stale heap entries; the sweep keeps the
		// heap bounded by the number of keys.
		for i := range 3000 {
			c.do("EXPIRE", "b", fmt.Sprint(100+i))
		}
		if n := s.Stats().ExpiryHeapEntries; n < 3000 {
			t.Fatalf("heap has %d entries", n)
		}
		s.ks.compactExpiry()
		if n := s.Stats().ExpiryHeapEntries; n != 1 {
			t.Errorf("after compaction the heap has %d entries", n)
		}
		// SET with a past absolute deadline: the key is gone at once.
		if got := c.do("SET", "d", "4", "PXAT", fmt.Sprint(time.Now().UnixMilli()-1)); got != "+OK\r\n" {
			t.Fatal(got)
		}
		if got := c.do("GET", "d"); got != "$-1\r\n" {
			t.Errorf("GET d = %q", got)
		}
	})
}

func TestInfo(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	c.do("SET", "k", strings.Repeat("i", 5000))
	c.do("GET", "k")
	c.do("GET", "missing")
	got := c.do("INFO")
	body := got[strings.Index(got, "\n")+1:]
	fields := map[string]string{}
	for _, line := range strings.Split(body, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	dram := s.store.Stats().Tiers[0]
	st := s.Stats()
	for k, want := range map[string]string{
		"connected_clients":        "1",
		"keyspace_hits":            "1",
		"keyspace_misses":          "1",
		"maxmemory":                fmt.Sprint(dram.Capacity), // inline values count inside it
		"used_memory":              fmt.Sprint(dram.Used - st.InlineReserved + st.InlineBytes),
		"maxmemory_policy":         "allkeys-lru",
		"db0":                      "keys=1,expires=0,avg_ttl=0",
		"total_commands_processed": "3",
		"tier_dram_blocks":         "1",
	} {
		if fields[k] != want {
			t.Errorf("INFO %s = %q, want %q", k, fields[k], want)
		}
	}
	if !bytes.Contains([]byte(got), []byte("# Keyspace\r\n")) {
		t.Errorf("INFO has no keyspace section")
	}
	if got := c.do("INFO", "clients"); !strings.Contains(got, "# Clients\r\n") || strings.Contains(got, "# Memory") {
		t.Errorf("INFO clients: %q", got)
	}
}

// TestManyConnections: hundreds of clients at once, each with its own keys,
// all served.
func TestManyConnections(t *testing.T) {
	s := startServer(t, Options{})
	n, ops := 300, 20
	if testing.Short() {
		n = 100
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := dial(t, s.addr)
			for j := range ops {
				k, v := fmt.Sprintf("c%d:%d", i, j), fmt.Sprintf("v%d", i*ops+j)
				if got := c.do("SET", k, v); got != "+OK\r\n" {
					t.Errorf("SET: %q", got)
					return
				}
				if got := c.do("GET", k); got != fmt.Sprintf("$%d\r\n%s\r\n", len(v), v) {
					t.Errorf("GET %s: %q", k, got)
					return
				}
			}
		})
	}
	waitFor(t, 10*time.Second, func() bool { return s.Stats().ConnectedClients == int64(n) || t.Failed() })
	wg.Wait()
	if st := s.Stats(); st.Keys != int64(n*ops) || st.TotalConnections != int64(n) {
		t.Errorf("%d keys from %d connections", st.Keys, st.TotalConnections)
	}
}
