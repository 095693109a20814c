package replicate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// randomRun drives a Core with seeded random events as a leader would (node
// events to the index first, actions acknowledged after random delays, some
// failing, some never) and checks every action when it is emitted:
//
//   - a Copy goes from an up node holding the block to an up node that does
//     not hold it and is not already receiving it, and not under pressure;
//   - a Drop takes a replica from an up node that holds it and leaves at
//     least the block's desired count of replicas on up nodes, counting the
//     drops still in flight;
//   - the in-flight bounds hold, and the core's counts of them add up.
//
// It returns the actions, as text, so a second run can check determinism.
func randomRun(t *testing.T, seed uint64, steps int) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	const (
		nodes   = 6
		nkeys   = 40
		timeout = 30 * time.Second
	)
	opts := Options{
		Window: time.Minute, HotHits: 8, MaxReplicas: 5, TrackFloor: 3, MaxHot: 12,
		MaxInFlight: 6, MaxInFlightPerNode: 2, ActionTimeout: timeout, RetryBackoff: 3 * time.Second,
		Cooldown: 20 * time.Second, ScanPerTick: 8, DefaultBlockSize: 1, SketchWidth: 256, Seed: seed,
	}
	g := index.NewGlobal(index.GlobalOptions{})
	c := mustCore(t, opts, g)
	keys := make([]block.Key, nkeys)
	for i := range keys {
		keys[i] = keyOfInt(uint64(i))
	}
	up := make([]bool, nodes)
	pressured := make([]bool, nodes)
	desired := map[block.Key]int{}
	type flight struct {
		a       Action
		at      time.Time
		ackAt   time.Time // zero: never acknowledged
		succeed bool
	}
	var (
		flights []flight
		log     []string
		now     = epoch
	)
	fatal := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, t=%v: %s", seed, now.Sub(epoch), fmt.Sprintf(format, args...))
	}
	step := func(ev Event) {
		t.Helper()
		if err := c.Step(now, ev); err != nil {
			fatal("Step(%T): %v", ev, err)
		}
	}
	alive := func(f flight) bool { return f.at.Add(timeout).After(now) }
	upHolders := func(k block.Key) int {
		n := 0
		for _, h := range g.Holders(k) {
			if up[h.Node] {
				n++
			}
		}
		return n
	}
	deliver := func() {
		kept := flights[:0]
		for _, f := range flights {
			if f.ackAt.IsZero() || f.ackAt.After(now) {
				kept = append(kept, f)
				continue
			}
			a := f.a
			ok := f.succeed && up[a.Node] && (a.Kind == Drop || up[a.From])
			if !ok {
				step(Done{ID: a.ID, Err: errors.New("injected")})
				continue
			}
			step(Done{ID: a.ID})
			if a.Kind == Copy {
				if err := g.Apply(a.Node, []index.Change{{Key: a.Key, Tier: 0, Added: true}}); err != nil {
					fatal("%v", err)
				}
				step(Added{Node: a.Node, Key: a.Key, Tier: 0})
				continue
			}
			tiers := g.NodeTiers(a.Node, a.Key)
			for tier := range index.MaxTiers {
				if tiers.Has(tier) {
					if err := g.Apply(a.Node, []index.Change{{Key: a.Key, Tier: uint8(tier)}}); err != nil {
						fatal("%v", err)
					}
					step(Removed{Node: a.Node, Key: a.Key, Tier: uint8(tier)})
				}
			}
		}
		flights = kept
	}
	check := func(a Action) {
		t.Helper()
		k := a.Key
		switch a.Kind {
		case Copy:
			switch {
			case !up[a.Node] || !up[a.From] || a.Node == a.From:
				fatal("%v: from or to a node that is down, or to itself", a)
			case g.NodeTiers(a.Node, k) != 0:
				fatal("%v: the target already holds the block", a)
			case g.NodeTiers(a.From, k) == 0:
				fatal("%v: the source does not hold the block", a)
			case pressured[a.Node]:
				fatal("%v: the target is under pressure", a)
			}
			for _, f := range flights {
				if alive(f) && f.a.Kind == Copy && f.a.Key == k && f.a.Node == a.Node {
					fatal("%v: #%d copies it there already", a, f.a.ID)
				}
			}
		case Drop:
			if !up[a.Node] || g.NodeTiers(a.Node, k) == 0 {
				fatal("%v: the node is down or does not hold the block", a)
			}
			left := upHolders(k) - 1
			for _, f := range flights {
				if alive(f) && f.a.Kind == Drop && f.a.Key == k && up[f.a.Node] && g.NodeTiers(f.a.Node, k) != 0 {
					left-- // a drop in flight of a replica still there
				}
			}
			if want := max(1, desired[k]); left < want {
				fatal("%v: leaves %d replicas, desired %d", a, left, want)
			}
		}
	}
	invariants := func() {
		t.Helper()
		if c.inflight > opts.MaxInFlight || c.inflight != len(c.ops) {
			fatal("in flight %d (ops %d), bound %d", c.inflight, len(c.ops), opts.MaxInFlight)
		}
		busy, copies := 0, 0
		for _, o := range c.ops {
			if o.kind == Copy {
				copies++
			}
		}
		for i, n := range c.nodes {
			if n.busy < 0 || n.busy > opts.MaxInFlightPerNode || n.reserved < 0 {
				fatal("node %d: busy %d, reserved %d", i, n.busy, n.reserved)
			}
			busy += n.busy
		}
		if busy != 2*copies {
			fatal("busy adds up to %d for %d copies in flight", busy, copies)
		}
		if c.hot > opts.MaxHot || c.hot < 0 {
			fatal("%d heat windows, bound %d", c.hot, opts.MaxHot)
		}
		for i, b := range c.tracked {
			if b.slot != i || c.blocks[b.key] != b {
				fatal("tracked block %d out of place", i)
			}
		}
	}
	nodeUp := func(n int) {
		step(NodeUp{Node: uint32(n), Capacity: 100, Free: int64(20 + r.IntN(80)), Load: r.Float64()})
	}
	for n := range nodes {
		up[n] = true
		if err := g.ReplaceNode(uint32(n), nil); err != nil {
			fatal("%v", err)
		}
		nodeUp(n)
	}
	for range steps {
		now = now.Add(time.Duration(r.IntN(3000)) * time.Millisecond)
		deliver()
		node := r.IntN(nodes)
		key := keys[min(r.IntN(nkeys), r.IntN(nkeys))] // skewed to low keys
		switch op := r.IntN(100); {
		case op < 4:
			if up[node] {
				up[node], pressured[node] = false, false
				g.RemoveNode(uint32(node))
				step(NodeDown{Node: uint32(node)})
				// The core failed the actions involving the node; so
				// does the executor.
				flights = slices.DeleteFunc(flights, func(f flight) bool {
					return f.a.Node == uint32(node) || (f.a.Kind == Copy && f.a.From == uint32(node))
				})
				break
			}
			// Back: with what it held, a random part of it, as its full
			// state.
			var full []index.Held
			for _, k := range keys {
				if r.IntN(4) == 0 {
					full = append(full, index.Held{Key: k, Tier: uint8(r.IntN(2))})
				}
			}
			if err := g.ReplaceNode(uint32(node), full); err != nil {
				fatal("%v", err)
			}
			up[node] = true
			nodeUp(node)
		case op < 10:
			if up[node] {
				nodeUp(node)
			}
		case op < 40:
			if up[node] {
				ks := []block.Key{key, keys[r.IntN(nkeys)]}
				step(Hits{Node: uint32(node), Keys: ks, Counts: []uint32{uint32(1 + r.IntN(6)), 1}})
			}
		case op < 55:
			if up[node] {
				tier := uint8(r.IntN(2))
				if err := g.Apply(uint32(node), []index.Change{{Key: key, Tier: tier, Added: true}}); err != nil {
					fatal("%v", err)
				}
				step(Added{Node: uint32(node), Key: key, Tier: tier, Size: 1})
			}
		case op < 62:
			if tiers := g.NodeTiers(uint32(node), key); tiers != 0 {
				tier := uint8(tiers.Top())
				if err := g.Apply(uint32(node), []index.Change{{Key: key, Tier: tier}}); err != nil {
					fatal("%v", err)
				}
				step(Removed{Node: uint32(node), Key: key, Tier: tier})
			}
		case op < 68:
			n := 1 + r.IntN(4)
			desired[key] = n
			step(SetReplicas{Key: key, Count: n})
		case op < 71:
			step(Pin{Key: key, Until: now.Add(time.Duration(r.IntN(60)) * time.Second)})
		case op < 75:
			if up[node] {
				bytes := int64(r.IntN(3))
				pressured[node] = bytes > 0
				step(Pressure{Node: uint32(node), Bytes: bytes})
			}
		default:
			for _, a := range c.Tick(now) {
				check(a)
				log = append(log, fmt.Sprintf("%v %v", now.Sub(epoch), a))
				f := flight{a: a, at: now, succeed: r.IntN(10) > 0}
				if r.IntN(20) > 0 { // one in 20 is never acknowledged
					f.ackAt = now.Add(time.Duration(r.IntN(8000)) * time.Millisecond)
				}
				flights = append(flights, f)
			}
		}
		invariants()
	}
	return log
}

func TestRandomInvariants(t *testing.T) {
	steps, runs := 20_000, 4
	if testing.Short() {
		steps, runs = 5000, 2
	}
	for range runs {
		seed := rand.Uint64()
		log := randomRun(t, seed, steps)
		copies, drops := 0, 0
		for _, l := range log {
			if strings.Contains(l, " copy ") {
				copies++
			}
			if strings.Contains(l, " drop ") {
				drops++
			}
		}
		// The run must exercise what it checks.
		if copies < 50 || drops < 20 {
			t.Fatalf("seed %d: only %d copies and %d drops in %d steps", seed, copies, drops, steps)
		}
		t.Logf("seed %d: %d copies, %d drops", seed, copies, drops)
	}
}

// TestDeterministic runs the same seeded events through two cores: the
// actions must be identical, time for time.
func TestDeterministic(t *testing.T) {
	seed := rand.Uint64()
	a, b := randomRun(t, seed, 3000), randomRun(t, seed, 3000)
	if !slices.Equal(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("seed %d: action %d differs:\n%s\n%s", seed, i, a[i], b[i])
			}
		}
		t.Fatalf("seed %d: %d actions, then %d", seed, len(a), len(b))
	}
	if len(a) == 0 {
		t.Fatalf("seed %d: no actions", seed)
	}
}
