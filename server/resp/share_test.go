package resp

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestInlineInsideDRAM: with the DRAM tier as the top tier, inline values
// take their memory from it. Filling a 4 MiB tier with small keys demotes
// its blocks to make room, then evicts inline keys; the tier's used bytes
// (the inline reservation included) never pass its capacity, INFO's
// used_memory stays within maxmemory, and deleting the keys gives the
// reservation back.
func TestInlineInsideDRAM(t *testing.T) {
	const capacity = 4 << 20
	store := testStore(t, capacity, 64<<20)
	t.Cleanup(func() { store.Close() })
	s := startServer(t, Options{Store: store, InlineCapacity: capacity})
	c := dial(t, s.addr)
	big := strings.Repeat("b", 1<<20)
	for i := range 3 {
		if got := c.do("SET", fmt.Sprint("block", i), big); got != "+OK\r\n" {
			t.Fatalf("SET block: %q", got)
		}
	}
	dramBlocks := func() int64 { return store.Tiers()[0].Stats().Blocks }
	if n := dramBlocks(); n != 3 {
		t.Fatalf("%d blocks in DRAM, want 3", n)
	}
	const keys, batch = 60000, 1000
	val := strings.Repeat("v", 28)
	for i := 0; i < keys; i += batch {
		var b strings.Builder
		for j := i; j < i+batch; j++ {
			k := fmt.Sprintf("key:%08d", j)
			fmt.Fprintf(&b, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(val), val)
		}
		c.send(b.String())
		for range batch {
			if got := c.reply(); got != "+OK\r\n" {
				t.Fatalf("SET: %q", got)
			}
		}
		if used := store.Tiers()[0].Stats().Used; used > capacity {
			t.Fatalf("after %d keys the DRAM tier holds %d bytes, over its %d", i+batch, used, capacity)
		}
		if st := s.Stats(); st.InlineBytes > st.InlineReserved {
			t.Fatalf("inline values cost %d bytes, beyond the %d reserved", st.InlineBytes, st.InlineReserved)
		}
	}
	st := s.Stats()
	if st.EvictedKeys == 0 || st.InlineKeys >= keys {
		t.Errorf("%d of %d keys kept, %d evicted: %d bytes did not fit in %d", st.InlineKeys, keys, st.EvictedKeys, keys*(28+12+entryOverhead), capacity)
	}
	if n := dramBlocks(); n != 0 {
		t.Errorf("%d blocks still in DRAM, want them demoted for the inline values", n)
	}
	if got := c.do("EXISTS", "block0", "block1", "block2"); got != ":3\r\n" {
		t.Errorf("the demoted blocks: EXISTS = %q, want :3", got)
	}
	info := c.do("INFO", "memory")
	var used, maxmem int64
	for _, line := range strings.Split(info, "\r\n") {
		fmt.Sscanf(line, "used_memory:%d", &used)
		fmt.Sscanf(line, "maxmemory:%d", &maxmem)
	}
	if maxmem != capacity || used <= 0 || used > maxmem {
		t.Errorf("INFO: used_memory %d, maxmemory %d, want within %d", used, maxmem, capacity)
	}

	// Emptied, the inline values give their reservation back within a
	// few expiry rounds, keeping at most two chunks of slack.
	if got := c.do("FLUSHDB"); got != "+OK\r\n" {
		t.Fatalf("FLUSHDB: %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().InlineReserved > 2*shareChunk && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r := s.Stats().InlineReserved; r > 2*shareChunk {
		t.Errorf("%d bytes still reserved for no inline values", r)
	}
	if got := c.do("SET", "again", "x"); got != "+OK\r\n" {
		t.Fatalf("SET after FLUSHDB: %q", got)
	}
}
