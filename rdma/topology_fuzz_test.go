package rdma

import (
	"testing"
)

// FuzzParseTopology: an operator's topology file is untrusted input. A
// topology that parses is valid, every location resolves to NICs, and
// Routes never pairs a NIC the topology does not name.
func FuzzParseTopology(f *testing.F) {
	f.Add([]byte(`{"cpu:0": {"preferred": ["n1", "n2"], "secondary": ["n3"]}, "*": {"preferred": ["n3"]}}`))
	f.Add([]byte(`{"cuda:1": {"preferred": ["10.0.0.1:7070"]}}`))
	f.Add([]byte(`{"a": {"preferred": ["x", "x"]}}`))
	f.Add([]byte(`{"": {"preferred": ["a"]}}`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := ParseTopology(data)
		if err != nil {
			return
		}
		if err := topo.Validate(); err != nil {
			t.Fatalf("parsed topology does not validate: %v", err)
		}
		named := map[string]bool{}
		for _, nic := range topo.All() {
			named[nic] = true
		}
		for _, loc := range append(topo.Locations(), "unlisted:9") {
			n := topo.For(loc)
			pref, sec := Routes(n, n)
			for _, p := range append(pref, sec...) {
				if !named[p.Local] || !named[p.Remote] {
					t.Fatalf("route %v names a NIC the topology does not", p)
				}
			}
		}
	})
}
