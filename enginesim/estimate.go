package enginesim

import (
	"math"
	"sync"
	"time"
)

// loadModel learns how long a Load of b bytes takes, t = fixed + b *
// perByte, from the loads done so far: a least-squares fit over
// exponentially weighted sums, so the estimate follows the machine as its
// load changes. With too little spread in sizes to fit a line it falls back
// to the mean time per byte.
type loadModel struct {
	mu                   sync.Mutex
	n                    int
	sx, sy, sxx, sxy, sw float64
}

// modelDecay is the weight the past keeps at each new load: about the last
// 20 loads count.
const modelDecay = 0.95

func (m *loadModel) add(bytes int64, d time.Duration) {
	if bytes <= 0 || d <= 0 {
		return
	}
	x, y := float64(bytes), d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	m.sw = m.sw*modelDecay + 1
	m.sx = m.sx*modelDecay + x
	m.sy = m.sy*modelDecay + y
	m.sxx = m.sxx*modelDecay + x*x
	m.sxy = m.sxy*modelDecay + x*y
}

// estimate returns the expected seconds of a load of bytes, and false
// before any load was measured.
func (m *loadModel) estimate(bytes int64) (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == 0 {
		return 0, false
	}
	mx, my := m.sx/m.sw, m.sy/m.sw
	vx := m.sxx/m.sw - mx*mx
	if m.n >= 3 && vx > 1e-6*mx*mx {
		slope := (m.sxy/m.sw - mx*my) / vx
		fixed := my - slope*mx
		if slope > 0 && fixed >= 0 {
			return fixed + slope*float64(bytes), true
		}
	}
	return my / mx * float64(bytes), true
}

// bytesPerSecond is the throughput the model implies for large loads, for
// metrics; 0 before any load.
func (m *loadModel) bytesPerSecond() float64 {
	const big = 1 << 30
	s, ok := m.estimate(big)
	if !ok || s <= 0 || math.IsInf(s, 0) {
		return 0
	}
	return big / s
}

// exploreEvery is how many loads in a row may be skipped before one is done
// anyway: the model learns only from loads, and a machine that got faster
// would otherwise never be measured again.
const exploreEvery = 16

// loadPays reports whether loading blocks [m, h) of a prompt of n tokens
// ends its prefill sooner than computing them. The prefill with the load
// computes layer l once it has landed; layers land a group at a time, the
// groups spread evenly over the estimated load time.
func (e *Engine) loadPays(n, m, h int) bool {
	est, ok := e.loads.estimate(int64(h-m) * e.layout.BlockBytes())
	if !ok || e.skipRun >= exploreEvery {
		return true
	}
	bt, L := e.layout.BlockTokens, e.layout.Layers
	per := e.prefillTime(n, h*bt).Seconds() / float64(L)
	groups := e.layout.Groups()
	t := 0.0
	for l := range L {
		arrive := est * float64(e.layout.GroupOf(l)+1) / float64(groups)
		t = max(t, arrive) + per
	}
	return t < e.prefillTime(n, m*bt).Seconds()
}
