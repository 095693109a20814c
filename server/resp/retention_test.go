package resp

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
)

// dramOnly is a store of one small DRAM tier, so that an evicted value is
// gone rather than demoted.
func dramOnly(t *testing.T, capacity int64) *tier.Hierarchy {
	t.Helper()
	d, err := dram.New(dram.Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d}, tier.HierarchyOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// classOf returns the retention class recorded for the block of key, and
// whether the key is held as a block.
func classOf(t *testing.T, ts *testServer, key string) (tier.BlockInfo, bool) {
	t.Helper()
	ns := ts.opts.Namespace(auth.DefaultTenant)
	e := ts.ks.get([]byte(ns + "\x00" + key))
	if e == nil || e.inline {
		return tier.BlockInfo{}, false
	}
	info, _, err := ts.store.Stat(e.bkey())
	if err != nil {
		t.Fatalf("Stat(%s): %v", key, err)
	}
	return info, true
}

func TestSetRetentionSurvivesEviction(t *testing.T) {
	ts := startServer(t, Options{Store: dramOnly(t, 2<<20)})
	c := dial(t, ts.addr)
	val := strings.Repeat("v", 100<<10)
	if r := c.do("SET", "keep", val, "retention", "PINNED"); r != "+OK\r\n" {
		t.Fatalf("SET RETENTION pinned = %q", r)
	}
	if info, ok := classOf(t, ts, "keep"); !ok || info.Retention != tier.RetentionPinned || !info.RetainUntil.IsZero() {
		t.Fatalf("keep's block: %+v, %v; want pinned with no end", info, ok)
	}
	if r := c.do("SET", "plain", val); r != "+OK\r\n" {
		t.Fatalf("SET = %q", r)
	}
	pressure := func() {
		t.Helper()
		for i := range 60 { // 6 MiB through a 2 MiB tier
			if r := c.do("SET", "filler"+string(rune('a'+i%26))+strings.Repeat("x", i/26), val); r != "+OK\r\n" {
				t.Fatalf("filler SET = %q", r)
			}
		}
	}
	pressure()
	if r := c.do("EXISTS", "plain"); r != ":0\r\n" {
		t.Fatalf("EXISTS plain after pressure = %q; want it evicted", r)
	}
	if r := c.do("GET", "keep"); r != "$"+itoa(int64(len(val)))+"\r\n"+val+"\r\n" {
		t.Fatalf("GET keep after pressure: %d bytes of reply; want the pinned value", len(r))
	}

	// Released without a rewrite: the same block, now evictable.
	before := ts.ks.get([]byte(ts.opts.Namespace(auth.DefaultTenant) + "\x00keep")).bkey()
	if r := c.do("yuebing.retain", "keep", "normal"); r != ":1\r\n" {
		t.Fatalf("YUEBING.RETAIN keep normal = %q", r)
	}
	after := ts.ks.get([]byte(ts.opts.Namespace(auth.DefaultTenant) + "\x00keep")).bkey()
	if info, ok := classOf(t, ts, "keep"); !ok || info.Retention != tier.RetentionNormal || after != before {
		t.Fatalf("keep's block after release: %+v; want the same block, normal", info)
	}
	pressure()
	if r := c.do("EXISTS", "keep"); r != ":0\r\n" {
		t.Fatalf("EXISTS keep after release and pressure = %q; want it evicted", r)
	}
	if r := c.do("YUEBING.RETAIN", "keep", "pinned"); r != ":0\r\n" {
		t.Fatalf("YUEBING.RETAIN of a missing key = %q; want :0", r)
	}
}

func TestSetRetentionOptions(t *testing.T) {
	ts := startServer(t, Options{})
	c := dial(t, ts.addr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "k", "v", "RETENTION", "forever"}, "-ERR RETENTION class"},
		{[]string{"SET", "k", "v", "RETENTION", ""}, "-ERR RETENTION class"},
		{[]string{"SET", "k", "v", "RETENTION"}, "-ERR syntax error"},
		{[]string{"SET", "k", "v", "RETENTION", "high", "TTL"}, "-ERR syntax error"},
		{[]string{"SET", "k", "v", "RETENTION", "high", "TTL", "0"}, "-ERR RETENTION TTL"},
		{[]string{"SET", "k", "v", "RETENTION", "high", "TTL", "x"}, "-ERR RETENTION TTL"},
		{[]string{"SET", "k", "v", "TTL", "5"}, "-ERR syntax error"},
		{[]string{"SET", "k", "v", "RETENTION", "high", "RETENTION", "low"}, "-ERR syntax error"},
		{[]string{"YUEBING.RETAIN", "k", "sticky"}, "-ERR RETENTION class"},
		{[]string{"YUEBING.RETAIN", "k", "low", "EX", "5"}, "-ERR syntax error"},
	} {
		if r := c.do(tc.args...); !strings.HasPrefix(r, tc.want) {
			t.Errorf("%q = %q; want %s...", tc.args, r, tc.want)
		}
	}
	if r := c.do("EXISTS", "k"); r != ":0\r\n" {
		t.Fatalf("EXISTS after refused SETs = %q; want nothing stored", r)
	}

	// A small value with a class is a block; without one it stays inline.
	if r := c.do("SET", "small", "v", "ex", "100", "Retention", "high", "ttl", "60"); r != "+OK\r\n" {
		t.Fatalf("SET small RETENTION high TTL 60 = %q", r)
	}
	info, ok := classOf(t, ts, "small")
	if !ok || info.Retention != tier.RetentionHigh || info.RetainUntil.IsZero() {
		t.Fatalf("small's block: %+v, %v; want high with an end", info, ok)
	}
	if r := c.do("TTL", "small"); r != ":100\r\n" && r != ":99\r\n" {
		t.Fatalf("TTL small = %q; the key's own expiry must stay", r)
	}
	if r := c.do("SET", "plain", "v"); r != "+OK\r\n" {
		t.Fatal(r)
	}
	if _, ok := classOf(t, ts, "plain"); ok {
		t.Fatal("a plain small SET is no longer inline")
	}
	// YUEBING.RETAIN moves an inline value into a block to class it.
	if r := c.do("YUEBING.RETAIN", "plain", "low"); r != ":1\r\n" {
		t.Fatalf("YUEBING.RETAIN plain low = %q", r)
	}
	if info, ok := classOf(t, ts, "plain"); !ok || info.Retention != tier.RetentionLow {
		t.Fatalf("plain after YUEBING.RETAIN low: %+v, %v", info, ok)
	}
	if r := c.do("GET", "plain"); r != "$1\r\nv\r\n" {
		t.Fatalf("GET plain = %q", r)
	}
}
