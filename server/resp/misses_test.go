package resp

import (
	"fmt"
	"strings"
	"testing"
)

// Every value read (GET, MGET's keys, GETDEL, GETRANGE) is one keyspace hit
// or miss and one of the store, so INFO's keyspace and store figures
// agree, but for inline values (a short "b" here), which are not in the
// store: the store's hits are the keyspace's less the inline ones. EXISTS
// is a lookup and counts in neither.
func TestReadsCountHitsAndMisses(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	c.do("SET", "a", strings.Repeat("a", 5000))
	c.do("SET", "b", "bee")
	for _, cmd := range [][]string{
		{"GET", "a"},                 // hit
		{"GET", "x"},                 // miss
		{"MGET", "a", "x", "y", "b"}, // two hits, two misses
		{"GETDEL", "z"},              // miss
		{"GETDEL", "b"},              // hit
		{"GET", "b"},                 // miss: deleted
		{"GETRANGE", "x", "0", "1"},  // miss
		{"EXISTS", "a", "x"},         // a lookup
	} {
		c.do(cmd...)
	}
	got := c.do("INFO", "stats")
	for _, want := range []string{"keyspace_hits:4\r\n", "keyspace_misses:6\r\n", "keyspace_inline_hits:2\r\n", "store_hits:2\r\n", "store_misses:6\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO stats lacks %q:\n%s", want, got)
		}
	}
	st := s.store.Stats()
	if st.Hits != 2 || st.Misses != 6 {
		t.Errorf("store hits/misses %d/%d, want 2/6", st.Hits, st.Misses)
	}
	if dram := st.Tiers[0]; fmt.Sprint(dram.Hits, dram.Misses) != "2 6" {
		t.Errorf("DRAM hits/misses %d/%d, want 2/6", dram.Hits, dram.Misses)
	}
}
