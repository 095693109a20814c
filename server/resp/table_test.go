package resp

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// TestTableModel runs seeded random sets, replacements and deletes against
// a table and a map, with few enough keys and a small table that probe
// runs wrap and collide, and checks every key after each step's kind.
func TestTableModel(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	sp := &space{name: "t/redis"}
	tb := table{seed: maphash.MakeSeed()}
	model := map[string]*entry{}
	mk := func(i int) *entry {
		return newEntryOf(sp, fmt.Appendf(nil, "k%d", i), "", []byte("v"), nil)
	}
	check := func(step int) {
		t.Helper()
		if tb.len() != len(model) {
			t.Fatalf("seed %d step %d: %d entries, want %d", seed, step, tb.len(), len(model))
		}
		for i := range 300 {
			k := string(compose(nil, sp, fmt.Appendf(nil, "k%d", i)))
			ns, name := splitKey(k)
			if got, want := tb.get(ns, name, maphash.String(tb.seed, k)), model[k]; got != want {
				t.Fatalf("seed %d step %d: get(%q) = %p, want %p", seed, step, k, got, want)
			}
		}
		n := 0
		tb.each(func(e *entry) bool {
			if model[e.space.name+"\x00"+e.name()] != e {
				t.Fatalf("seed %d step %d: each visits %q, not the current entry", seed, step, e.name())
			}
			n++
			return true
		})
		if n != len(model) {
			t.Fatalf("seed %d step %d: each visits %d, want %d", seed, step, n, len(model))
		}
	}
	for step := range 20000 {
		e := mk(rng.IntN(300))
		k := e.space.name + "\x00" + e.name()
		h := maphash.String(tb.seed, k)
		if h != hashEntry(tb.seed, e) {
			t.Fatalf("hashEntry differs from the hash of the composed key %q", k)
		}
		if rng.IntN(3) == 0 {
			tb.del(sp.name, e.name(), h)
			delete(model, k)
		} else {
			tb.set(e, h)
			model[k] = e
		}
		if step%997 == 0 || step > 19900 {
			check(step)
		}
	}
	// Emptied, the table gives its slots back and still works.
	for k := range model {
		ns, name := splitKey(k)
		tb.del(ns, name, maphash.String(tb.seed, k))
		delete(model, k)
	}
	check(-1)
	if len(tb.slots) > minTableSize {
		t.Errorf("an empty table keeps %d slots", len(tb.slots))
	}
	e := mk(1)
	tb.set(e, hashEntry(tb.seed, e))
	model[sp.name+"\x00"+e.name()] = e
	check(-2)
}
