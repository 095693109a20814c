package replicate

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// epoch is time zero of the scripts.
var epoch = time.Unix(1_000_000_000, 0)

// harness drives a Core and the global index it reads, as the leader does:
// node events go to the index first, then to the core; acknowledged actions
// are applied to the index and reported as the node would.
type harness struct {
	core    *Core
	g       *index.Global
	now     time.Time
	names   map[block.Key]string
	pending map[uint64]Action
}

func keyOf(name string) block.Key { return sha256.Sum256([]byte(name)) }

func (h *harness) key(name string) block.Key {
	k := keyOf(name)
	h.names[k] = name
	return k
}

func (h *harness) name(k block.Key) string {
	if n, ok := h.names[k]; ok {
		return n
	}
	return fmt.Sprintf("%x", k[:4])
}

func (h *harness) step(t *testing.T, d *datadriven.TestData, ev Event) {
	t.Helper()
	if err := h.core.Step(h.now, ev); err != nil {
		d.Fatalf(t, "Step(%T): %v", ev, err)
	}
}

func (h *harness) format(a Action) string {
	if a.Kind == Copy {
		return fmt.Sprintf("#%d copy %s %d->%d %s", a.ID, h.name(a.Key), a.From, a.Node, a.Reason)
	}
	return fmt.Sprintf("#%d drop %s @%d %s", a.ID, h.name(a.Key), a.Node, a.Reason)
}

// TestDataDriven runs the scripts in testdata/. Commands (sizes and
// capacities in bytes; the scripts' blocks are 1 byte unless size= says
// otherwise):
//
//	init [window=60s buckets=6 hot=4 factor=2 max=4 keep=0.5 cooldown=60s
//	      floor=2 maxhot=N inflight=N pernode=N timeout=2m backoff=5s scan=N]
//	node-up id=N [cap=100 free=100 load=0]    up, or new figures
//	node-down id=N                            the node is gone (index too)
//	add node=N k1 k2 [tier=0 size=1]          the node stored blocks
//	remove node=N k1 [tier=0]                 the node evicted blocks
//	hits node=N k1 k2 [n=1]                   n hits of each key by the node
//	replicas k count=N                        desired replica count
//	pin k until=D | pin k off                 pin until epoch+D
//	pressure node=N bytes=B
//	advance D                                 move the clock
//	tick                                      print the actions
//	ack [id ...]                              complete actions (default all)
//	fail id ...                               fail actions
//	state                                     tracked blocks and counters
//	top n=K                                   the K hottest blocks
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *harness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "init" && h == nil {
				d.Fatalf(t, "%s before init", d.Cmd)
			}
			switch d.Cmd {
			case "init":
				g := index.NewGlobal(index.GlobalOptions{})
				h = &harness{
					core:    mustCore(t, scriptOptions(t, d), g),
					g:       g,
					now:     epoch,
					names:   map[block.Key]string{},
					pending: map[uint64]Action{},
				}
				return "ok\n"
			case "node-up":
				e := NodeUp{Node: uint32(intArg(t, d, "id", -1)), Capacity: int64(intArg(t, d, "cap", 100)),
					Free: int64(intArg(t, d, "free", 100)), Load: floatArg(t, d, "load", 0)}
				h.step(t, d, e)
			case "node-down":
				node := uint32(intArg(t, d, "id", -1))
				h.g.RemoveNode(node)
				h.step(t, d, NodeDown{Node: node})
				for id, a := range h.pending {
					if a.Node == node || (a.Kind == Copy && a.From == node) {
						delete(h.pending, id) // failed by the core; a late ack is ignored
					}
				}
			case "add", "remove":
				node := uint32(intArg(t, d, "node", -1))
				tier := uint8(intArg(t, d, "tier", 0))
				size := int64(intArg(t, d, "size", 1))
				for _, name := range bareArgs(d) {
					k := h.key(name)
					if err := h.g.Apply(node, []index.Change{{Key: k, Tier: tier, Added: d.Cmd == "add"}}); err != nil {
						d.Fatalf(t, "%v", err)
					}
					if d.Cmd == "add" {
						h.step(t, d, Added{Node: node, Key: k, Tier: tier, Size: size})
					} else {
						h.step(t, d, Removed{Node: node, Key: k, Tier: tier})
					}
				}
			case "hits":
				e := Hits{Node: uint32(intArg(t, d, "node", -1))}
				n := uint32(intArg(t, d, "n", 1))
				for _, name := range bareArgs(d) {
					e.Keys = append(e.Keys, h.key(name))
					e.Counts = append(e.Counts, n)
				}
				h.step(t, d, e)
			case "replicas":
				h.step(t, d, SetReplicas{Key: h.key(bareArgs(d)[0]), Count: intArg(t, d, "count", -1)})
			case "pin":
				e := Pin{Key: h.key(bareArgs(d)[0])}
				if !d.HasArg("off") {
					e.Until = epoch.Add(durationArg(t, d, "until"))
				}
				h.step(t, d, e)
			case "pressure":
				h.step(t, d, Pressure{Node: uint32(intArg(t, d, "node", -1)), Bytes: int64(intArg(t, d, "bytes", -1))})
			case "advance":
				dur, err := time.ParseDuration(d.CmdArgs[0].Key)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				h.now = h.now.Add(dur)
				return fmt.Sprintf("t=%v\n", h.now.Sub(epoch))
			case "tick":
				acts := h.core.Tick(h.now)
				if len(acts) == 0 {
					return "none\n"
				}
				var b strings.Builder
				for _, a := range acts {
					h.pending[a.ID] = a
					fmt.Fprintln(&b, h.format(a))
				}
				return b.String()
			case "ack", "fail":
				ids := idArgs(t, d)
				if len(ids) == 0 && d.Cmd == "ack" {
					for id := range h.pending {
						ids = append(ids, id)
					}
					slices.Sort(ids)
				}
				for _, id := range ids {
					a, ok := h.pending[id]
					if !ok {
						// A duplicate or stale ack: the core must ignore it.
						h.step(t, d, Done{ID: id})
						continue
					}
					delete(h.pending, id)
					if d.Cmd == "fail" {
						h.step(t, d, Done{ID: id, Err: errors.New("injected")})
						continue
					}
					h.step(t, d, Done{ID: id})
					h.applyEffect(t, d, a)
				}
			case "state":
				return h.state()
			case "top":
				var b strings.Builder
				for _, s := range h.core.Top(h.now, intArg(t, d, "n", 10)) {
					fmt.Fprintf(&b, "%s heat=%d replicas=%d\n", h.name(s.Key), s.Heat, s.Replicas)
				}
				if b.Len() == 0 {
					return "none\n"
				}
				return b.String()
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			return "ok\n"
		})
	})
}

// applyEffect does what the node reports after an action completes: the
// index learns of it, then the core through the node's event.
func (h *harness) applyEffect(t *testing.T, d *datadriven.TestData, a Action) {
	if a.Kind == Copy {
		if err := h.g.Apply(a.Node, []index.Change{{Key: a.Key, Tier: 0, Added: true}}); err != nil {
			d.Fatalf(t, "%v", err)
		}
		h.step(t, d, Added{Node: a.Node, Key: a.Key, Tier: 0})
		return
	}
	tiers := h.g.NodeTiers(a.Node, a.Key)
	for tier := range index.MaxTiers {
		if tiers.Has(tier) {
			if err := h.g.Apply(a.Node, []index.Change{{Key: a.Key, Tier: uint8(tier)}}); err != nil {
				d.Fatalf(t, "%v", err)
			}
			h.step(t, d, Removed{Node: a.Node, Key: a.Key, Tier: uint8(tier)})
		}
	}
}

func (h *harness) state() string {
	var b strings.Builder
	tracked := slices.Clone(h.core.tracked)
	slices.SortFunc(tracked, func(x, y *blockState) int { return strings.Compare(h.name(x.key), h.name(y.key)) })
	for _, bs := range tracked {
		s, _ := h.core.Block(h.now, bs.key)
		var holders []string
		for _, hd := range bs.holders {
			mark := ""
			if !h.core.nodes[hd.node].up {
				mark = "(down)"
			}
			holders = append(holders, strconv.Itoa(int(hd.node))+mark)
		}
		fmt.Fprintf(&b, "%s: heat=%d replicas=%d desired=%d holders=[%s]", h.name(bs.key), s.Heat, s.Replicas, s.Desired, strings.Join(holders, " "))
		if s.Pinned {
			b.WriteString(" pinned")
		}
		if s.InFlight > 0 {
			fmt.Fprintf(&b, " inflight=%d", s.InFlight)
		}
		if bs.parked {
			b.WriteString(" parked")
		}
		b.WriteString("\n")
	}
	st := h.core.Stats()
	fmt.Fprintf(&b, "tracked=%d hot=%d inflight=%d queued=%d parked=%d copies=%d drops=%d failed=%d\n",
		st.Tracked, st.Hot, st.InFlight, st.Queued, st.Parked, st.Copies, st.Drops, st.Failed)
	return b.String()
}

func scriptOptions(t *testing.T, d *datadriven.TestData) Options {
	o := Options{
		HotHits:          4,
		MaxReplicas:      4,
		TrackFloor:       2,
		DefaultBlockSize: 1,
	}
	for _, a := range d.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		dur := func() time.Duration {
			x, err := time.ParseDuration(v)
			if err != nil {
				d.Fatalf(t, "%s: %v", a.Key, err)
			}
			return x
		}
		num := func() int {
			x, err := strconv.Atoi(v)
			if err != nil {
				d.Fatalf(t, "%s: %v", a.Key, err)
			}
			return x
		}
		switch a.Key {
		case "window":
			o.Window = dur()
		case "buckets":
			o.Buckets = num()
		case "hot":
			o.HotHits = uint32(num())
		case "factor":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				d.Fatalf(t, "factor: %v", err)
			}
			o.HotFactor = f
		case "max":
			o.MaxReplicas = num()
		case "keep":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				d.Fatalf(t, "keep: %v", err)
			}
			o.KeepRatio = f
		case "cooldown":
			o.Cooldown = dur()
		case "floor":
			o.TrackFloor = uint32(num())
		case "maxhot":
			o.MaxHot = num()
		case "inflight":
			o.MaxInFlight = num()
		case "pernode":
			o.MaxInFlightPerNode = num()
		case "timeout":
			o.ActionTimeout = dur()
		case "backoff":
			o.RetryBackoff = dur()
		case "scan":
			o.ScanPerTick = num()
		default:
			d.Fatalf(t, "unknown option %q", a.Key)
		}
	}
	return o
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	if !d.HasArg(key) {
		if def < 0 {
			d.Fatalf(t, "%s: missing %s=", d.Cmd, key)
		}
		return def
	}
	var v int
	d.ScanArgs(t, key, &v)
	return v
}

func floatArg(t *testing.T, d *datadriven.TestData, key string, def float64) float64 {
	if !d.HasArg(key) {
		return def
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

func durationArg(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

// bareArgs returns the arguments without a value: the keys.
func bareArgs(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && a.Key != "off" {
			out = append(out, a.Key)
		}
	}
	return out
}

func idArgs(t *testing.T, d *datadriven.TestData) []uint64 {
	var ids []uint64
	for _, s := range bareArgs(d) {
		id, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 10, 64)
		if err != nil {
			d.Fatalf(t, "id %q: %v", s, err)
		}
		ids = append(ids, id)
	}
	return ids
}
