package resp

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadsOfExpiredKey: every read command treats a key past its deadline
// as absent, before the background sweep has removed it (lazy expiry on
// access, as Redis does).
func TestReadsOfExpiredKey(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	s := startServer(t, Options{Now: clock})
	c := dial(t, s.addr)
	for _, tc := range []struct {
		args []string
		live string // reply while the key lives
		gone string // reply once it has expired
	}{
		{[]string{"GET", "k"}, "$5\r\nhello\r\n", "$-1\r\n"},
		{[]string{"MGET", "k", "k"}, "*2\r\n$5\r\nhello\r\n$5\r\nhello\r\n", "*2\r\n$-1\r\n$-1\r\n"},
		{[]string{"STRLEN", "k"}, ":5\r\n", ":0\r\n"},
		{[]string{"GETRANGE", "k", "1", "2"}, "$2\r\nel\r\n", "$0\r\n\r\n"},
		{[]string{"EXISTS", "k"}, ":1\r\n", ":0\r\n"},
		{[]string{"TYPE", "k"}, "+string\r\n", "+none\r\n"},
		{[]string{"PTTL", "k"}, ":1000\r\n", ":-2\r\n"},
		{[]string{"PERSIST", "k"}, ":1\r\n", ":0\r\n"},
		{[]string{"DEL", "k"}, ":1\r\n", ":0\r\n"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			if got := c.do("SET", "k", "hello", "PX", "1000"); got != "+OK\r\n" {
				t.Fatal(got)
			}
			if got := c.do(tc.args...); got != tc.live {
				t.Errorf("live: %q = %q, want %q", tc.args, got, tc.live)
			}
			c.do("SET", "k", "hello", "PX", "1000")
			now.Add(int64(1001 * time.Millisecond))
			if got := c.do(tc.args...); got != tc.gone {
				t.Errorf("expired: %q = %q, want %q", tc.args, got, tc.gone)
			}
		})
	}
}

// TestLMCachePairs: an LMCache chunk's metadata never outlives its
// payload. Evicting either half removes the other; a payload gone from the
// store hides its metadata at once, before the key table hears of it.
func TestLMCachePairs(t *testing.T) {
	st := testStore(t, 4<<20, 8<<20)
	t.Cleanup(func() { st.Close() })
	s := startServer(t, Options{Store: st})
	c := dial(t, s.addr)
	kv := strings.Repeat("k", 256<<10)
	md := strings.Repeat("m", 28)
	n := 100
	for i := range n {
		k := fmt.Sprintf("vllm@model@1@0@%04x", i)
		sep := ""
		if i%2 == 1 {
			sep = ":" // the Valkey connector's layout
		}
		if got := c.do("SET", k+sep+"kv_bytes", kv); got != "+OK\r\n" {
			t.Fatal(got)
		}
		if got := c.do("SET", k+sep+"metadata", md); got != "+OK\r\n" {
			t.Fatal(got)
		}
	}
	present := 0
	for i := range n {
		k := fmt.Sprintf("vllm@model@1@0@%04x", i)
		if i%2 == 1 {
			k += ":"
		}
		// Demotion and eviction still run in the background, so either
		// half may go between two reads: the payload read before the
		// metadata catches metadata outliving its payload, the one after
		// catches a payload that stays once its metadata is gone.
		p1, m, p2 := c.do("EXISTS", k+"kv_bytes"), c.do("EXISTS", k+"metadata"), c.do("EXISTS", k+"kv_bytes")
		if p1 == ":0\r\n" && m == ":1\r\n" {
			t.Errorf("chunk %d: metadata visible after its payload was gone", i)
		}
		if m == ":0\r\n" && p2 == ":1\r\n" {
			waitFor(t, 5*time.Second, func() bool { return c.do("EXISTS", k+"kv_bytes") == ":0\r\n" })
		}
		if m == ":1\r\n" && p2 == ":1\r\n" {
			present++
		}
	}
	if present == 0 || present == n {
		t.Errorf("%d of %d chunks present: eviction did not happen or took all", present, n)
	}

	// The window: the payload's block leaves the store's index (as on
	// eviction) before OnDrop has run.
	if got := c.do("SET", "w:kv_bytes", kv); got != "+OK\r\n" {
		t.Fatal(got)
	}
	c.do("SET", "w:metadata", md)
	e := s.ks.get(compose(nil, s.ks.space("default/redis"), []byte("w:kv_bytes")))
	if e == nil {
		t.Fatal("no entry for w:kv_bytes")
	}
	if err := st.Delete(e.bkey()); err != nil { // no OnDrop: the table still has it
		t.Fatal(err)
	}
	if got := c.do("EXISTS", "w:metadata"); got != ":0\r\n" {
		t.Errorf("metadata of a payload gone from the store: EXISTS = %q", got)
	}
	if got := c.do("GET", "w:metadata"); got != "$-1\r\n" {
		t.Errorf("GET = %q", got)
	}
	// A metadata-like key with no payload written first is an ordinary key.
	c.do("SET", "user:metadata", "x")
	if got := c.do("GET", "user:metadata"); got != "$1\r\nx\r\n" {
		t.Errorf("unpaired metadata key: %q", got)
	}
	// Evicting the (inline) metadata takes the payload with it, and the
	// store's eviction of a payload block takes the metadata.
	c.do("SET", "d:kv_bytes", kv)
	c.do("SET", "d:metadata", md)
	e = s.ks.get(compose(nil, s.ks.space("default/redis"), []byte("d:metadata")))
	if !e.inline || !e.paired {
		t.Fatalf("28-byte metadata: inline %v, tied %v", e.inline, e.paired)
	}
	s.evict(e)
	if got := c.do("EXISTS", "d:kv_bytes", "d:metadata"); got != ":0\r\n" {
		t.Errorf("after the metadata was evicted: %q", got)
	}
	c.do("SET", "d:kv_bytes", kv)
	c.do("SET", "d:metadata", md)
	e = s.ks.get(compose(nil, s.ks.space("default/redis"), []byte("d:kv_bytes")))
	s.dropped(e.bkey())
	if got := c.do("EXISTS", "d:kv_bytes", "d:metadata"); got != ":0\r\n" {
		t.Errorf("after the payload was dropped: %q", got)
	}
	// Both halves inline: evicting the payload takes the metadata.
	c.do("SET", "s:kv_bytes", "tiny")
	c.do("SET", "s:metadata", md)
	s.evict(s.ks.get(compose(nil, s.ks.space("default/redis"), []byte("s:kv_bytes"))))
	if got := c.do("EXISTS", "s:kv_bytes", "s:metadata"); got != ":0\r\n" {
		t.Errorf("after the inline payload was evicted: %q", got)
	}
}
