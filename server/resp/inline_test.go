package resp

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestInlineValues: values up to InlineMax live in the key table, not in
// blocks; they are bounded by InlineCapacity (evicted past it), verified
// on read, written as blocks for another node and for a restart, and
// listed by SCAN beside block values.
func TestInlineValues(t *testing.T) {
	s := startServer(t, Options{InlineMax: 64, InlineCapacity: 64 << 10})
	c := dial(t, s.addr)
	f := func(want string, args ...string) {
		t.Helper()
		if got := c.do(args...); got != want {
			t.Errorf("%q = %.80q, want %.80q", args, got, want)
		}
	}
	f("+OK\r\n", "SET", "small", "v")
	f("+OK\r\n", "SET", "edge", strings.Repeat("e", 64))
	f("+OK\r\n", "SET", "block", strings.Repeat("b", 65))
	f(":1\r\n", "INCR", "n")
	if st := s.Stats(); st.InlineKeys != 3 || s.store.Len() != 1 {
		t.Errorf("%d inline keys and %d blocks, want 3 and 1", st.InlineKeys, s.store.Len())
	}
	f("$1\r\nv\r\n", "GET", "small")
	f("$64\r\n"+strings.Repeat("e", 64)+"\r\n", "GET", "edge")
	f("$1\r\nv\r\n", "SET", "small", "old", "GET") // GET answers the previous value
	f("$3\r\nold\r\n", "SET", "small", "new", "GET")
	f("$3\r\nnew\r\n", "GETDEL", "small")
	f(":0\r\n", "EXISTS", "small")

	// SCAN, one key per call, finds block and inline keys alike.
	var keys []string
	for cursor := "0"; ; {
		// *2, $len, cursor, *n, then $len and name per key.
		lines := strings.Split(c.do("SCAN", cursor, "COUNT", "1"), "\r\n")
		cursor = lines[2]
		for i := 5; i < len(lines); i += 2 {
			keys = append(keys, lines[i])
		}
		if cursor == "0" {
			break
		}
	}
	slices.Sort(keys)
	if got := strings.Join(keys, ","); got != "block,edge,n" {
		t.Errorf("SCAN found %q", got)
	}

	// A value that fails its checksum is dropped and read as missing.
	e := s.ks.get(compose(nil, s.ks.space("default/redis"), []byte("edge")))
	e.val()[0] ^= 1
	f("$-1\r\n", "GET", "edge")
	f(":0\r\n", "EXISTS", "edge")
	if n := s.Stats().CorruptValues; n != 1 {
		t.Errorf("%d corrupt values counted, want 1", n)
	}

	// Another node reads a key by block: the inline value is written as
	// one, with its record, and deleted with the key.
	f("+OK\r\n", "SET", "shared", "abc", "EX", "100")
	rk, ok := s.LocalName("default/redis", "shared")
	if !ok || rk.Size != 3 || rk.ExpireAtMs == 0 {
		t.Fatalf("LocalName = %+v, %v", rk, ok)
	}
	h, _, err := s.store.Get(context.Background(), rk.Block)
	if err != nil || string(h.Bytes()) != "abc" {
		t.Fatalf("the written block: %v", err)
	}
	h.Release()
	info, _, _ := s.store.Stat(rk.Block)
	if rec, err := parseRecord(info.Meta); err != nil || rec.name != "shared" || rec.expireAt != rk.ExpireAtMs {
		t.Errorf("the written block's record: %+v, %v", rec, err)
	}
	f(":1\r\n", "DEL", "shared")
	if s.store.Contains(rk.Block) {
		t.Error("the block of a deleted inline key is still stored")
	}

	// Past InlineCapacity, inline keys are evicted.
	for i := range 2000 {
		f("+OK\r\n", "SET", fmt.Sprint("fill", i), strings.Repeat("f", 28))
	}
	st := s.Stats()
	if st.InlineBytes > 64<<10 || st.EvictedKeys == 0 || st.InlineKeys >= 2000 {
		t.Errorf("after 2000 keys into 64 KiB: %d inline keys of %d bytes, %d evicted", st.InlineKeys, st.InlineBytes, st.EvictedKeys)
	}
	f(":1\r\n", "EXISTS", "block") // block values are the store's to evict

	// A shutdown writes inline values as blocks only while its context
	// lasts.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if n := s.persistInline(done); n != 0 {
		t.Errorf("%d inline values written after the deadline", n)
	}
	if n := s.persistInline(context.Background()); int64(n) != s.Stats().InlineKeys {
		t.Errorf("%d inline values written, of %d", n, s.Stats().InlineKeys)
	}
	t.Logf("%d of 2000 inline keys kept in 64 KiB, %d evicted", st.InlineKeys, st.EvictedKeys)
}

// TestInlineMemory measures what an inline key costs, the entryOverhead
// charged against InlineCapacity: a 28-byte value (LMCache's metadata)
// under a 16-byte key, as redis-benchmark's.
func TestInlineMemory(t *testing.T) {
	n := 100000
	if testing.Short() {
		n = 20000
	}
	s := &Server{ks: newKeyspace(), opts: Options{InlineMax: DefaultInlineMax}}
	c := &conn{s: s, sp: s.ks.space("default/redis")}
	val := []byte(strings.Repeat("m", 28))
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := range n {
		name := fmt.Appendf(nil, "key:%012d", i)
		e := c.newInline(name, val, 0)
		s.ks.swap(nil, e)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := float64(m1.HeapAlloc-m0.HeapAlloc) / float64(n)
	charged := float64(s.ks.inlineBytes.Load()) / float64(n)
	t.Logf("%.0f bytes per key in the heap, %.0f charged", per, charged)
	if per > charged {
		t.Errorf("an inline key takes %.0f bytes but is charged %.0f: raise entryOverhead", per, charged)
	}
	runtime.KeepAlive(s)
}

// TestEntrySize: an entry stays one 64-byte size class, what the memory
// per key of docs/resp.md is built on.
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 64 {
		t.Errorf("an entry is %d bytes, more than 64", n)
	}
}
