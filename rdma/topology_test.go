package rdma

import (
	"fmt"
	"strings"
	"testing"
)

func TestRoutes(t *testing.T) {
	nics := func(p, s string) NICs {
		n := NICs{Preferred: strings.Fields(p)}
		if s != "" {
			n.Secondary = strings.Fields(s)
		}
		return n
	}
	for _, tc := range []struct {
		name                 string
		local, remote        NICs
		preferred, secondary string
	}{
		{"one each", nics("a", ""), nics("x", ""), "a>x", ""},
		{"rails", nics("a b", ""), nics("x y", ""), "a>x b>y", "a>y b>x"},
		{"more remote", nics("a", ""), nics("x y z", ""), "a>x a>y a>z", ""},
		{"more local", nics("a b c", ""), nics("x", ""), "a>x b>x c>x", ""},
		{"secondaries last", nics("a", "b"), nics("x", "y"), "a>x", "a>y b>x b>y"},
		{"no remote", nics("a", ""), NICs{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := Routes(tc.local, tc.remote)
			str := func(ps []Path) string {
				var out []string
				for _, p := range ps {
					out = append(out, p.Local+">"+p.Remote)
				}
				return strings.Join(out, " ")
			}
			if str(p) != tc.preferred || str(s) != tc.secondary {
				t.Fatalf("Routes = [%s] [%s], want [%s] [%s]", str(p), str(s), tc.preferred, tc.secondary)
			}
		})
	}
}

func TestTopology(t *testing.T) {
	topo, err := ParseTopology([]byte(`{"cpu:0": {"preferred": ["n1", "n2"], "secondary": ["n3"]}, "*": {"preferred": ["n3"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(topo.For("cpu:0")); got != "{[n1 n2] [n3]}" {
		t.Errorf("For(cpu:0) = %s", got)
	}
	if got := fmt.Sprint(topo.For("cuda:1")); got != "{[n3] []}" {
		t.Errorf("For(cuda:1) = %s", got)
	}
	if got := fmt.Sprint(topo.All()); got != "[n3 n1 n2]" {
		t.Errorf("All() = %s", got)
	}
	noDefault := Topology{"cpu:0": {Preferred: []string{"n1"}}, "cpu:1": {Preferred: []string{"n2"}}}
	if got := fmt.Sprint(noDefault.For("gpu")); got != "{[n1 n2] []}" {
		t.Errorf("For without a default = %s", got)
	}
	for _, bad := range []string{
		`{"cpu:0": {"preferred": []}}`,
		`{"cpu:0": {"preferred": ["a", "a"]}}`,
		`{"cpu:0": {"preferred": [""]}}`,
		`{"": {"preferred": ["a"]}}`,
		`[1]`,
	} {
		if _, err := ParseTopology([]byte(bad)); err == nil {
			t.Errorf("ParseTopology(%s) accepted", bad)
		}
	}
}
