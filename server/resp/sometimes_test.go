package resp

import (
	"testing"
	"time"
)

func TestSometimes(t *testing.T) {
	var l sometimes
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at      time.Duration
		ok      bool
		skipped int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{5 * time.Second, false, 0},
		{warnEvery, true, 2},
		{warnEvery + time.Millisecond, false, 0},
		{3 * warnEvery, true, 1},
	}
	for i, s := range steps {
		ok, skipped := l.allow(t0.Add(s.at))
		if ok != s.ok || skipped != s.skipped {
			t.Errorf("step %d at %v: allow = %v, %d; want %v, %d", i, s.at, ok, skipped, s.ok, s.skipped)
		}
	}
}
