package policy

import "testing"

// Two branch classes under one read root: single-block branches nested
// once, which never come back, and four-block ones, which always do. Once
// the short class has its returnsMinJudged blocks judged, its branches are
// refused and the long ones still written; a refused branch that comes
// back counts for its class as a written one does.
func TestAdmissionReturns(t *testing.T) {
	a, err := NewAdmission[int](AdmitReturns, 1000)
	if err != nil {
		t.Fatal(err)
	}
	held := func(int) bool { return true }
	a.Put(0, 0, false)
	a.Access(0)
	next := 1
	// branch puts n blocks after root 0 and a child after the last, so
	// that only the tail rule's block is left out, and returns its root.
	branch := func(n int) int {
		root := next
		parent := 0
		for range n {
			a.Put(next, parent, true)
			parent = next
			next++
		}
		a.Extend(parent)
		return root
	}
	var shortWritten, longRefused int
	for i := range 30 {
		s := branch(1)
		if a.Admit(s, held) {
			shortWritten++
		}
		l := branch(4)
		if !a.Admit(l, held) {
			longRefused++
		}
		a.Access(l) // every long branch is read again
		if i == 0 {
			// No class has a record yet: both are written.
			if shortWritten != 1 || longRefused != 0 {
				t.Fatalf("first branches: short written %d, long refused %d; want both written", shortWritten, longRefused)
			}
		}
	}
	if shortWritten > returnsMinJudged {
		t.Errorf("%d of 30 never-read single-block branches written, want at most %d", shortWritten, returnsMinJudged)
	}
	if longRefused != 0 {
		t.Errorf("%d of 30 always-read branches refused", longRefused)
	}

	// The short class comes back from now on, refused as it is: its share
	// rises above the mean's and it is written again.
	var rewritten int
	for range 60 {
		s := branch(1)
		if a.Admit(s, held) {
			rewritten++
		}
		a.Forget(s)
		a.Put(s, 0, true) // the refused branch is asked for again
	}
	if rewritten == 0 {
		t.Error("a refused class that comes back is never written again")
	}
}

// The record of judged branches is bounded: a branch judged longer ago
// than the last remember judgements no longer counts when it comes back.
func TestAdmissionReturnsBounded(t *testing.T) {
	r := newReturns[int](2)
	c := branchClass{1, 0}
	for k := range 3 {
		r.judge(k, c, 1)
	}
	if r.pending.len() != 2 {
		t.Fatalf("%d judged branches remembered, want 2", r.pending.len())
	}
	r.back(0) // judged 3 judgements ago: forgotten
	r.back(2)
	r.back(2) // counted once
	if got := r.classes[c].back; got != 1 {
		t.Errorf("class back %v, want 1", got)
	}
	if r.all.judged > 4 || r.all.judged < r.classes[c].judged {
		t.Errorf("all judged %v, class judged %v: not halved past twice the record", r.all.judged, r.classes[c].judged)
	}
}

// A workload of one kind of branch is never refused for its kind: the
// class is the mean it would be compared with.
func TestAdmissionReturnsOneKind(t *testing.T) {
	a, _ := NewAdmission[int](AdmitReturns, 1000)
	held := func(int) bool { return true }
	a.Put(0, 0, false)
	a.Access(0)
	for i := 1; i <= 40; i += 2 {
		a.Put(i, 0, true)
		a.Put(i+1, i, true)
		if !a.Admit(i, held) {
			t.Fatalf("branch %d of the only kind refused", i)
		}
		if i%3 == 0 {
			a.Access(i)
		}
	}
}
