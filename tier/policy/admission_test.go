package policy

import (
	"errors"
	"testing"
)

// The chain rules, one situation each: which evicted block is written below.
func TestAdmissionChain(t *testing.T) {
	type put struct {
		k, parent string
	}
	f := func(name string, puts []put, held []string, k string, want bool) {
		t.Helper()
		a, err := NewAdmission[string](name, 16)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range puts {
			a.Put(p.k, p.parent, p.parent != "")
		}
		isHeld := func(k string) bool {
			for _, h := range held {
				if h == k {
					return true
				}
			}
			return false
		}
		if got := a.Admit(k, isHeld); got != want {
			t.Errorf("%s: puts %v, held %v: Admit(%s) = %v, want %v", name, puts, held, k, got, want)
		}
	}
	chain := []put{{"a", ""}, {"b", "a"}, {"c", "b"}}
	f(AdmitAll, chain, nil, "c", true)                   // today: everything
	f(AdmitChain, chain, []string{"a", "b"}, "c", false) // c is the tail
	f(AdmitChain, chain, []string{"a"}, "b", true)       // extended, parent held
	f(AdmitChain, chain, nil, "b", false)                // parent gone: no prefix reaches b
	f(AdmitChain, chain, nil, "a", true)                 // a chain's root
	f(AdmitChain, []put{{"x", ""}}, nil, "x", true)      // no chain known: as all
	f(AdmitChain, nil, nil, "never-put", true)           // unknown: as all
	f(AdmitLearned, chain, []string{"a"}, "b", true)     // no class history yet
}

// A branch class that never comes back is refused, but for one branch in
// learnedExplore; one whose branches are read back stays admitted.
func TestAdmissionLearned(t *testing.T) {
	a, err := NewAdmission[int](AdmitLearned, 0)
	if err != nil {
		t.Fatal(err)
	}
	held := func(int) bool { return true }
	// Branches of two blocks under a shared, read root 0: 2i+1 (the branch
	// root) and its tail 2i+2.
	a.Put(0, 0, false)
	a.Access(0)
	branch := func(i int) int {
		a.Put(2*i+1, 0, true)
		a.Put(2*i+2, 2*i+1, true)
		return 2*i + 1
	}
	written := 0
	for i := range 40 {
		r := branch(i)
		if a.Admit(r, held) {
			written++
			a.Dropped(r) // never read back
		}
	}
	// The first few are written while the estimate is above the threshold,
	// then one in learnedExplore.
	if written < 40/learnedExplore || written > 40/learnedExplore+4 {
		t.Errorf("%d of 40 never-read branches written, want about %d", written, 40/learnedExplore)
	}
	b, _ := NewAdmission[int](AdmitLearned, 0)
	a = b
	a.Put(0, 0, false)
	a.Access(0)
	for i := range 40 {
		r := branch(i)
		if !a.Admit(r, held) {
			t.Fatalf("branch %d refused though every written one came back", i)
		}
		a.HitBelow(r)
	}
}

// A block that left every tier and comes back keeps its history: its
// chain's extension and its uses.
func TestAdmissionGhost(t *testing.T) {
	a, _ := NewAdmission[string](AdmitChain, 2)
	a.Put("a", "", false)
	a.Put("b", "a", true)
	a.Forget("a")
	a.Forget("b")
	if a.Len() != 0 {
		t.Fatalf("Len = %d after forgetting all", a.Len())
	}
	a.Put("a", "", false)
	if !a.Admit("a", func(string) bool { return false }) {
		t.Error("a returning block extended before is refused as a tail")
	}
	// A ghost of 2 keeps the last two forgotten blocks only.
	for _, k := range []string{"x", "y", "z"} {
		a.Put(k, "a", true)
		a.Forget(k)
	}
	a.Put("x", "a", true)
	if a.nodes["x"].uses != 1 {
		t.Errorf("x came back with %d uses; it left the ghost, want 1", a.nodes["x"].uses)
	}
	a.Put("z", "a", true)
	if a.nodes["z"].uses != 2 {
		t.Errorf("z came back with %d uses, want 2", a.nodes["z"].uses)
	}
}

// A put that evicts its own parent: Extend, called before it, keeps the
// parent from counting as a tail.
func TestAdmissionExtend(t *testing.T) {
	a, _ := NewAdmission[string](AdmitChain, 0)
	a.Put("a", "", false)
	a.Put("b", "a", true)
	held := func(string) bool { return true }
	if a.Admit("b", held) {
		t.Fatal("b admitted before anything extends it")
	}
	a.Extend("b")
	a.Extend("unknown") // no-op
	if !a.Admit("b", held) {
		t.Error("b refused after Extend")
	}
}

func TestAdmissionNames(t *testing.T) {
	for _, n := range AdmissionNames {
		if _, err := NewAdmission[int](n, 1); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := NewAdmission[int]("sometimes", 1); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("unknown name: %v, want ErrUnknownPolicy", err)
	}
	if _, err := NewAdmission[int](AdmitChain, -1); !errors.Is(err, ErrCapacity) {
		t.Errorf("negative ghost: %v, want ErrCapacity", err)
	}
}
