package resp

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/policy"
	"github.com/yuebing/yuebing/tier/ssd"
)

// chainStore is a 1 MiB DRAM tier over a 16 MiB SSD tier under chain
// admission, so that a chain's tail evicted from DRAM leaves the store.
func chainStore(t *testing.T) *tier.Hierarchy {
	t.Helper()
	d, err := dram.New(dram.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: t.TempDir(), Capacity: 16 << 20, SegmentSize: 256 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{
		Admission: policy.AdmitChain, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// SET's YUEBING.PARENT reaches the store's chain admission: the evicted
// chains' tails are not written to SSD and their keys go, the rest of
// each chain is demoted and stays. Without the option no value has a
// chain and every one is demoted. Values read whole (40 kB) and values
// streamed into their block (100 kB, whose parent comes after them) both
// carry it.
func TestSetParentChainAdmission(t *testing.T) {
	f := func(size int, withParent bool) {
		t.Helper()
		ts := startServer(t, Options{Store: chainStore(t)})
		c := dial(t, ts.addr)
		chains := 4 * (1 << 20) / (4 * size) // four times DRAM
		key := func(chain, i int) string { return fmt.Sprintf("chain%d:%d", chain, i) }
		for ch := range chains {
			for i := range 4 {
				args := []string{"SET", key(ch, i), strings.Repeat(string(rune('a'+i)), size)}
				if i > 0 && withParent {
					args = append(args, "YUEBING.PARENT", key(ch, i-1))
				}
				if r := c.do(args...); r != "+OK\r\n" {
					t.Fatalf("SET %s = %q", key(ch, i), r)
				}
			}
		}
		// The first chains left DRAM long ago; their demotions (or
		// refusals) land asynchronously.
		first := chains / 4
		settled := func() bool {
			for ch := range first {
				for i := range 4 {
					e := ts.ks.get([]byte(ts.opts.Namespace(auth.DefaultTenant) + "\x00" + key(ch, i)))
					if e == nil {
						continue
					}
					if le, ok := ts.store.Lookup(e.bkey()); ok && !le.Tiers.Has(1) {
						return false // still in DRAM or on its way down
					}
				}
			}
			return true
		}
		deadline := time.Now().Add(10 * time.Second)
		for !settled() {
			if time.Now().After(deadline) {
				t.Fatalf("size %d parent %v: the first chains' demotions did not settle", size, withParent)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for ch := range first {
			for i := range 4 {
				want := ":1\r\n"
				if withParent && i == 3 {
					want = ":0\r\n" // a tail, refused by SSD admission
				}
				if r := c.do("EXISTS", key(ch, i)); r != want {
					t.Errorf("size %d parent %v: EXISTS %s = %q, want %q", size, withParent, key(ch, i), r, want)
				}
			}
		}
		if refused := ts.store.AdmissionRefused(); (refused > 0) != withParent {
			t.Errorf("size %d parent %v: %d evictions refused", size, withParent, refused)
		}
	}
	for _, size := range []int{40_000, 100_000} {
		f(size, true)
		f(size, false)
	}
}

func TestSetParentErrors(t *testing.T) {
	ts := startServer(t, Options{})
	c := dial(t, ts.addr)
	long := strings.Repeat("p", maxKeyLen(ts.opts.Namespace(auth.DefaultTenant))+1)
	big := strings.Repeat("v", 100<<10)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "k", "v", "YUEBING.PARENT"}, "-ERR syntax error\r\n"},
		{[]string{"SET", "k", "v", "YUEBING.PARENT", "a", "yuebing.parent", "b"}, "-ERR syntax error\r\n"},
		{[]string{"SET", "k", "v", "YUEBING.PARENT", "k"}, "-ERR YUEBING.PARENT names the key being set\r\n"},
		{[]string{"SET", "k", big, "yuebing.parent", "k"}, "-ERR YUEBING.PARENT names the key being set\r\n"},
		{[]string{"SET", "k", "v", "YUEBING.PARENT", long}, fmt.Sprintf("-ERR YUEBING.PARENT key of %d bytes is longer than the %d bytes allowed\r\n", len(long), len(long)-1)},
		// A parent that does not exist is no error: the value has no chain.
		{[]string{"SET", "k", "v", "NX", "EX", "100", "YUEBING.PARENT", "nosuch"}, "+OK\r\n"},
		{[]string{"SET", "k2", big, "YUEBING.PARENT", "k", "XX"}, "$-1\r\n"},
		{[]string{"SET", "k3", big, "YUEBING.PARENT", "k", "PX", "100000"}, "+OK\r\n"},
	} {
		if r := c.do(tc.args...); r != tc.want {
			t.Errorf("%.60q = %q, want %q", tc.args, r, tc.want)
		}
	}
	if r := c.do("STRLEN", "k3"); r != fmt.Sprintf(":%d\r\n", len(big)) {
		t.Errorf("STRLEN k3 = %q", r)
	}
	if r := c.do("PTTL", "k3"); r == ":-1\r\n" || r == ":-2\r\n" {
		t.Errorf("PTTL k3 = %q, want its deadline", r)
	}
	if nothing := c.do("GET", "k2"); nothing != "$-1\r\n" {
		t.Errorf("GET k2 = %q", nothing)
	}
}
