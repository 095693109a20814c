package enginesim

import (
	"math"
	"testing"
	"time"
)

func TestLoadModel(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	for _, tc := range []struct {
		name   string
		loads  [][2]float64 // bytes, milliseconds
		bytes  int64
		wantMS float64
		known  bool
	}{
		{"nothing measured", nil, 1 << 20, 0, false},
		{"one size: time per byte", [][2]float64{{1e6, 4}, {1e6, 4}}, 3e6, 12, true},
		// t = 1 ms + 1 ms per MB: the fixed cost is learnt.
		{"a line", [][2]float64{{1e6, 2}, {2e6, 3}, {4e6, 5}}, 8e6, 9, true},
		// A fit with a negative fixed cost falls back to time per byte (the
		// recent loads weigh a little more).
		{"no sensible line", [][2]float64{{1e6, 1}, {2e6, 4}, {3e6, 7}}, 2e6, 2 * 12.0 / 6, true},
		{"ignores empty loads", [][2]float64{{0, 5}, {1e6, 0}}, 1e6, 0, false},
	} {
		var m loadModel
		for _, l := range tc.loads {
			m.add(int64(l[0]), ms(l[1]))
		}
		got, ok := m.estimate(tc.bytes)
		if ok != tc.known || math.Abs(got*1e3-tc.wantMS) > 0.05 {
			t.Errorf("%s: estimate(%d) = %v ms, %v; want %v ms, %v", tc.name, tc.bytes, got*1e3, ok, tc.wantMS, tc.known)
		}
	}
}
