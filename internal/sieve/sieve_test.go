package sieve

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func keys(c *Cache[string, int]) []string {
	var ks []string
	c.Range(func(k string, _ int) bool { ks = append(ks, k); return true })
	return ks
}

// TestPaperExample replays the example of the SIEVE paper's Figure 1: a
// cache of 7 holding A..G (A oldest), where A, B and G were hit; inserting H
// evicts C, the oldest unvisited entry, and inserting I then evicts D.
func TestPaperExample(t *testing.T) {
	c := New[string, int](7)
	for i, k := range []string{"A", "B", "C", "D", "E", "F", "G"} {
		c.Add(k, i)
	}
	for _, k := range []string{"A", "B", "G"} {
		c.Get(k)
	}
	steps := []struct{ add, evicted string }{{"H", "C"}, {"I", "D"}}
	for _, s := range steps {
		k, _, ok := c.Add(s.add, 0)
		if !ok || k != s.evicted {
			t.Fatalf("Add(%s) evicted %q (%v), want %q", s.add, k, ok, s.evicted)
		}
	}
	if got, want := keys(c), []string{"I", "H", "G", "F", "E", "B", "A"}; !slices.Equal(got, want) {
		t.Fatalf("queue = %v, want %v", got, want)
	}
}

func TestTable(t *testing.T) {
	type op struct {
		kind    byte // 'a' add, 'g' get, 'r' remove
		key     string
		evicted string
	}
	for _, tc := range []struct {
		name string
		cap  int
		ops  []op
		want []string
	}{
		{"fifo without hits", 2, []op{{'a', "x", ""}, {'a', "y", ""}, {'a', "z", "x"}}, []string{"z", "y"}},
		{"hit survives", 2, []op{{'a', "x", ""}, {'a', "y", ""}, {'g', "x", ""}, {'a', "z", "y"}}, []string{"z", "x"}},
		{"all visited evicts oldest after sweep", 2, []op{{'a', "x", ""}, {'a', "y", ""}, {'g', "x", ""}, {'g', "y", ""}, {'a', "z", "x"}}, []string{"z", "y"}},
		{"replace keeps size", 2, []op{{'a', "x", ""}, {'a', "x", ""}, {'a', "y", ""}}, []string{"y", "x"}},
		{"remove frees room", 2, []op{{'a', "x", ""}, {'a', "y", ""}, {'r', "x", ""}, {'a', "z", ""}}, []string{"z", "y"}},
		{"zero capacity means one", 0, []op{{'a', "x", ""}, {'a', "y", "x"}}, []string{"y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string, int](tc.cap)
			for _, o := range tc.ops {
				switch o.kind {
				case 'a':
					k, _, ok := c.Add(o.key, 1)
					if (o.evicted != "") != ok || k != o.evicted {
						t.Fatalf("Add(%s) evicted %q %v, want %q", o.key, k, ok, o.evicted)
					}
				case 'g':
					c.Get(o.key)
				case 'r':
					c.Remove(o.key)
				}
			}
			if got := keys(c); !slices.Equal(got, tc.want) {
				t.Fatalf("keys = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRandomAgainstModel checks the links and the size bound under random
// operations against a map.
func TestRandomAgainstModel(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	c := New[int, int](8)
	model := map[int]int{}
	for i := range 20000 {
		k := rng.IntN(20)
		switch rng.IntN(3) {
		case 0:
			ek, _, ok := c.Add(k, i)
			if ok {
				delete(model, ek)
			}
			model[k] = i
		case 1:
			v, ok := c.Get(k)
			if mv, mok := model[k]; ok != mok || v != mv {
				t.Fatalf("seed %d: Get(%d) = %d %v, model %d %v", seed, k, v, ok, mv, mok)
			}
		case 2:
			c.Remove(k)
			delete(model, k)
		}
		if c.Len() != len(model) || c.Len() > 8 {
			t.Fatalf("seed %d: len %d, model %d", seed, c.Len(), len(model))
		}
	}
	n := 0
	c.Range(func(int, int) bool { n++; return true })
	if n != c.Len() {
		t.Fatalf("seed %d: list has %d nodes, map %d", seed, n, c.Len())
	}
}

// TestEvictFiltered: an unbounded cache evicts only when asked, passes over
// entries the filter refuses (keeping their visited bit), and reports when
// nothing may go.
func TestEvictFiltered(t *testing.T) {
	c := NewUnbounded[string, int]()
	for i, k := range []string{"A", "B", "C", "D"} {
		if _, _, ev := c.Add(k, i); ev {
			t.Fatal("an unbounded cache evicted on Add")
		}
	}
	c.Get("B")
	notA := func(k string) bool { return k != "A" }
	if k, v, ok := c.Evict(notA); !ok || k != "C" || v != 2 {
		t.Fatalf("Evict = %q %d %v, want C: A refused, B visited", k, v, ok)
	}
	if k, _, ok := c.Evict(nil); !ok || k != "D" {
		t.Fatalf("Evict = %q %v, want D: the hand goes on from C", k, ok)
	}
	if _, _, ok := c.Evict(func(string) bool { return false }); ok {
		t.Fatal("Evict took an entry the filter refused")
	}
	if c.Len() != 2 {
		t.Fatalf("Len = %d", c.Len())
	}
}
