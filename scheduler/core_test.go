package scheduler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// testKey names a block in scripts by a short string.
func testKey(name string) block.Key { return block.OpaqueKey("test/model", []byte(name)) }

func testKeys(list string) []block.Key {
	var keys []block.Key
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			keys = append(keys, testKey(n))
		}
	}
	return keys
}

// testChain is keys "name0".."name<n-1>", a chain of n blocks.
func testChain(name string, n int) []block.Key {
	keys := make([]block.Key, n)
	for i := range keys {
		keys[i] = testKey(name + strconv.Itoa(i))
	}
	return keys
}

// linearPrefill takes 1 s per 10,000 uncached tokens: round numbers for
// hand-made cases.
func linearPrefill(t testing.TB) *PrefillModel {
	t.Helper()
	var samples []PrefillSample
	for _, n := range []int{1000, 5000, 10000, 40000} {
		for _, p := range []int{0, n / 4, n / 2, n} {
			samples = append(samples, PrefillSample{n, p, float64(n-p) / 1e4})
		}
	}
	m, err := FitPrefill(samples)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scriptOptions are the options of datadriven scripts: block size 256,
// prefill 1 s per 10k tokens, transfer 100k tokens/s, TBT = 10 ms + 1 ms
// per sequence + 10 ms per 100k KV tokens, t_d 10 s, SLOs 5 s and 50 ms.
func scriptOptions(t testing.TB) Options {
	return Options{
		BlockSize:           256,
		Prefill:             linearPrefill(t),
		Decode:              NewDecodeModel(0.010, 0.001, 1e-7),
		KVBytesPerToken:     1,
		Bandwidth:           100_000,
		TTFTSLO:             5 * time.Second,
		TBTSLO:              50 * time.Millisecond,
		DecodeTime:          10 * time.Second,
		DefaultOutputTokens: 100,
		BalancingThreshold:  1.25,
	}
}

func TestCoreScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/core", func(t *testing.T, path string) {
		var c *Core
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			at := func() time.Duration {
				var s string
				if d.HasArg("at") {
					d.ScanArgs(t, "at", &s)
				} else {
					return 0
				}
				v, err := time.ParseDuration(s)
				if err != nil {
					d.Fatalf(t, "at: %v", err)
				}
				return v
			}
			str := func(key string) string {
				var s string
				if d.HasArg(key) {
					d.ScanArgs(t, key, &s)
				}
				return s
			}
			num := func(key string) int {
				var v int
				if d.HasArg(key) {
					d.ScanArgs(t, key, &v)
				}
				return v
			}
			dur := func(key string) time.Duration {
				if s := str(key); s != "" {
					v, err := time.ParseDuration(s)
					if err != nil {
						d.Fatalf(t, "%s: %v", key, err)
					}
					return v
				}
				return 0
			}
			errOr := func(err error, ok string) string {
				if err != nil {
					return "error: " + err.Error()
				}
				return ok
			}
			switch d.Cmd {
			case "init":
				o := scriptOptions(t)
				var err error
				if s := str("policy"); s != "" {
					if o.Policy, err = ParsePolicy(s); err != nil {
						d.Fatalf(t, "%v", err)
					}
				}
				if s := str("rejection"); s != "" {
					if o.Rejection, err = ParseRejection(s); err != nil {
						d.Fatalf(t, "%v", err)
					}
				}
				if s := str("threshold"); s != "" {
					if o.BalancingThreshold, err = strconv.ParseFloat(s, 64); err != nil {
						d.Fatalf(t, "%v", err)
					}
				}
				c, err = NewCore(o)
				return errOr(err, "ok")
			case "add":
				role, err := ParseRole(str("role"))
				if err != nil {
					return "error: " + err.Error()
				}
				return errOr(c.AddInstance(Instance{ID: str("id"), Role: role, Capacity: int64(num("cap"))}, at()), "ok")
			case "remove":
				return errOr(c.RemoveInstance(str("id")), "ok")
			case "blocks":
				u := BlockUpdate{Reset: d.HasArg("reset"), Added: testKeys(str("add")), Removed: testKeys(str("remove"))}
				if s := str("chain"); s != "" {
					name, nb, _ := strings.Cut(s, "*")
					n, _ := strconv.Atoi(nb)
					u.Added = append(u.Added, testChain(name, n)...)
				}
				if d.HasArg("tier") {
					u.Tiers = index.TierMask(0).With(num("tier"))
				}
				return errOr(c.UpdateBlocks(str("id"), u), "ok")
			case "heartbeat":
				l := Load{QueueTime: dur("queue"), Batch: num("batch"), KVTokens: int64(num("kv"))}
				return errOr(c.Heartbeat(str("id"), l, at()), "ok")
			case "schedule":
				req := Request{ID: str("id"), InputTokens: num("n"), OutputTokens: num("out"), Keys: testKeys(str("keys"))}
				if s := str("chain"); s != "" {
					name, nb, _ := strings.Cut(s, "*")
					n, _ := strconv.Atoi(nb)
					req.Keys = append(req.Keys, testChain(name, n)...)
				}
				dec, err := c.Schedule(req, at())
				if err != nil {
					return "error: " + err.Error()
				}
				return formatDecision(dec)
			case "schedule-burst":
				// n one-block requests "b<i>" of distinct chains.
				accepted := 0
				for i := range num("n") {
					dec, err := c.Schedule(Request{ID: "b" + strconv.Itoa(i), Keys: testChain("burst"+strconv.Itoa(i)+"-", 1)}, at())
					if err != nil {
						return "error: " + err.Error()
					}
					if dec.Accepted() {
						accepted++
					}
				}
				return fmt.Sprintf("%d accepted", accepted)
			case "prefill-done":
				return errOr(c.PrefillDone(str("id"), at()), "ok")
			case "finish":
				return errOr(c.Finished(str("id"), at()), "ok")
			case "expire":
				return fmt.Sprintf("expired %d", c.Expire(at()))
			case "query":
				var b strings.Builder
				keys := testKeys(str("keys"))
				if s := str("chain"); s != "" {
					name, nb, _ := strings.Cut(s, "*")
					n, _ := strconv.Atoi(nb)
					keys = append(keys, testChain(name, n)...)
				}
				for _, m := range c.Query(keys) {
					fmt.Fprintf(&b, "%s (%s): %d blocks, per tier %v\n", m.ID, m.Role, m.Blocks, m.PerTier[:3])
				}
				return b.String()
			case "instances":
				var b strings.Builder
				for _, s := range c.Instances(at()) {
					fmt.Fprintf(&b, "%s %s blocks=%d queue=%v batch=%d kv=%d tbt=%v load=%.2f scheduled=%d\n",
						s.ID, s.Role, s.Blocks, s.QueueTime.Round(time.Microsecond), s.Batch, s.KVTokens, s.TBT.Round(time.Microsecond), s.Load, s.Scheduled)
				}
				fmt.Fprintf(&b, "in flight: %d\n", c.InFlight())
				return b.String()
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func formatDecision(d Decision) string {
	var b strings.Builder
	if d.Rejected != "" {
		fmt.Fprintf(&b, "rejected %s: ", d.Rejected)
	}
	fmt.Fprintf(&b, "%s prefill=%s decode=%s prefix=%d local=%d best=%d", d.RequestID, d.Prefill, d.Decode, d.PrefixTokens, d.LocalPrefixTokens, d.BestPrefixTokens)
	if d.BestHolder != "" {
		fmt.Fprintf(&b, "@%s", d.BestHolder)
	}
	e := d.Estimates
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	e.TTFT, e.Transfer, e.Queue, e.Prefill, e.TBT = r(e.TTFT), r(e.Transfer), r(e.Queue), r(e.Prefill), r(e.TBT)
	fmt.Fprintf(&b, "\nttft=%v (transfer=%v queue=%v prefill=%v) tbt=%v", e.TTFT, e.Transfer, e.Queue, e.Prefill, e.TBT)
	if d.Pull != nil {
		fmt.Fprintf(&b, "\npull %s->%s %d blocks %d tokens", d.Pull.From, d.Pull.To, len(d.Pull.Keys), d.Pull.Tokens)
	}
	return b.String()
}

// TestScheduleExclude: an excluded instance is never chosen, as prefill
// or decode; with every prefill instance excluded there is none.
func TestScheduleExclude(t *testing.T) {
	c, err := NewCore(scriptOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []Instance{{ID: "p0", Role: RolePrefill}, {ID: "p1", Role: RolePrefill}, {ID: "d0", Role: RoleDecode}, {ID: "d1", Role: RoleDecode}} {
		if err := c.AddInstance(in, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		d, err := c.Schedule(Request{InputTokens: 100, Exclude: []string{"p0", "d1", "nobody"}}, time.Duration(i))
		if err != nil {
			t.Fatal(err)
		}
		if d.Prefill != "p1" || d.Decode == "d1" {
			t.Fatalf("request %d placed on %s/%s despite the exclusion", i, d.Prefill, d.Decode)
		}
	}
	if _, err := c.Schedule(Request{InputTokens: 100, Exclude: []string{"p0", "p1"}}, 0); !errors.Is(err, ErrNoPrefill) {
		t.Fatalf("every prefill excluded: %v, want ErrNoPrefill", err)
	}
}
