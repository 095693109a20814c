package http

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/bench"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// Options configures `yuebing bench http`.
type Options struct {
	// Addr is the node to measure, host:port or a URL. Empty: Run starts
	// one in this process (see Node) and measures that.
	Addr string
	// Node configures the node Run starts when Addr is empty.
	Node NodeOptions
	// Token authenticates, when the node runs with auth.
	Token string
	// Namespace the blocks are written to. Default "bench/http".
	Namespace string
	// ValueSize is the size of every block. Default 4 MiB.
	ValueSize int64
	// Concurrency is the number of requests in flight. Default 8.
	Concurrency int
	// GetWeight and PutWeight are the operation mix. Default 1 and 0:
	// gets only. Gets read a working set written before the clock starts;
	// puts write new blocks.
	GetWeight, PutWeight int
	// Keys is the size of the working set of gets. Default
	// max(2*Concurrency, 16), capped so it holds at most 512 MiB.
	Keys int
	// Duration of the measurement, and again of the baseline. Default 5s.
	Duration time.Duration
	// Rounds splits Duration into alternating baseline and measurement
	// rounds, so a change in background load on a shared machine weighs
	// on both alike. Default 3.
	Rounds int
	// Progress, if set, is advanced as time passes (in tenths of a second).
	Progress *bench.Progress
}

func (o *Options) ensureDefaults() {
	if o.Namespace == "" {
		o.Namespace = "bench/http"
	}
	if o.ValueSize == 0 {
		o.ValueSize = 4 << 20
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.GetWeight == 0 && o.PutWeight == 0 {
		o.GetWeight = 1
	}
	if o.Keys == 0 {
		o.Keys = max(2*o.Concurrency, 16)
		o.Keys = max(min(o.Keys, int((512<<20)/o.ValueSize)), 1)
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Rounds == 0 {
		o.Rounds = 3
	}
}

// Ticks is the Progress total of Run: tenths of a second of the
// baseline and the measurement.
func Ticks(o Options) int64 {
	o.ensureDefaults()
	return 2 * int64(o.Duration/(100*time.Millisecond))
}

// Run measures gets and puts of one node over HTTP through the Go
// client, and as the same-run baseline a raw loopback TCP transfer of the
// same bytes per operation at the same concurrency: the cost of HTTP, the
// API and the store over moving the bytes at all.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	o.ensureDefaults()
	if o.GetWeight < 0 || o.PutWeight < 0 || o.Concurrency < 1 || o.ValueSize < 1 || o.Duration <= 0 {
		return nil, fmt.Errorf("bench: invalid http options %+v", o)
	}
	if o.Addr == "" {
		stop, addr, err := StartNode(o.Node, o.ValueSize)
		if err != nil {
			return nil, err
		}
		defer stop()
		o.Addr = addr
	}
	c, err := client.New(o.Addr, client.Options{Token: o.Token})
	if err != nil {
		return nil, err
	}
	if err := c.Health(ctx); err != nil {
		return nil, fmt.Errorf("bench: node at %s: %w", o.Addr, err)
	}
	value := bench.RandomBytes(42, o.ValueSize)
	keys := make([]block.Key, o.Keys)
	run := rand.Uint64() // keys of this run, so gets hit blocks it wrote
	for i := range keys {
		keys[i] = httpKey(o.Namespace, run, 0, uint64(i))
		if _, err := c.PutStream(ctx, o.Namespace, keys[i], bytes.NewReader(value), o.ValueSize, client.PutOptions{}); err != nil {
			return nil, fmt.Errorf("bench: writing the working set: %w", err)
		}
	}
	tick := func() {}
	if o.Progress != nil {
		tick = func() { o.Progress.Add(1) }
	}

	round := o
	round.Duration = o.Duration / time.Duration(o.Rounds)
	base, res := map[string]*opStats{}, map[string]*opStats{}
	for range o.Rounds {
		b, err := tcpBaseline(ctx, round, tick)
		if err != nil {
			return nil, err
		}
		merge(base, b)
		h, err := measureHTTP(ctx, round, c, tick, run, keys, value)
		if err != nil {
			return nil, err
		}
		merge(res, h)
	}
	rep := &bench.Report{Columns: []string{"name", "value_bytes", "concurrency", "ops_per_s", "gbps", "p50_ms", "p99_ms", "p999_ms", "baseline", "baseline_gbps", "ratio", "errors"}}
	rep.Human = bench.HumanColumns["http"]
	for _, op := range []string{"get", "put"} {
		b, h := base[op], res[op]
		if h == nil || b == nil {
			continue
		}
		rep.Add(b.row("tcp_"+op, o))
		row := h.row("http_"+op, o)
		row["baseline"] = "tcp_" + op
		row["baseline_gbps"] = b.gbps()
		row["ratio"] = h.gbps() / b.gbps()
		rep.Add(row)
	}
	return rep, nil
}

func merge(into, from map[string]*opStats) {
	for name, s := range from {
		t := into[name]
		if t == nil {
			into[name] = s
			continue
		}
		t.ops += s.ops
		t.errs += s.errs
		t.bytes += s.bytes
		t.elapsed += s.elapsed
		t.lat = append(t.lat, s.lat...)
	}
}

// measureHTTP runs one round of the mix through the client.
func measureHTTP(ctx context.Context, o Options, c *client.Client, tick func(), run uint64, keys []block.Key, value []byte) (map[string]*opStats, error) {
	return measure(ctx, o, tick, func(w int, rng *rand.Rand, buf []byte, put bool, i uint64) error {
		if put {
			_, err := c.PutStream(ctx, o.Namespace, httpKey(o.Namespace, run, uint64(w)+1, rand.Uint64()), bytes.NewReader(value), o.ValueSize, client.PutOptions{})
			return err
		}
		r, err := c.Open(ctx, keys[rng.IntN(len(keys))], client.GetOptions{})
		if err != nil {
			return err
		}
		_, err = io.ReadFull(r, buf)
		if err == nil && r.Length != o.ValueSize {
			err = fmt.Errorf("got %d bytes, want %d", r.Length, o.ValueSize)
		}
		r.Close()
		return err
	})
}

// httpKey derives distinct keys per run, worker and operation.
func httpKey(ns string, run, worker, i uint64) block.Key {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], run)
	binary.LittleEndian.PutUint64(b[8:], worker)
	binary.LittleEndian.PutUint64(b[16:], i)
	return block.OpaqueKey(ns, b[:])
}

// opStats are one operation's results.
type opStats struct {
	ops, errs int64
	bytes     int64
	elapsed   time.Duration
	lat       []time.Duration
}

func (s *opStats) gbps() float64 { return float64(s.bytes) / s.elapsed.Seconds() / 1e9 }

func (s *opStats) row(name string, o Options) bench.Row {
	slices.Sort(s.lat)
	q := func(p float64) float64 {
		if len(s.lat) == 0 {
			return 0
		}
		return float64(s.lat[min(int(p*float64(len(s.lat))), len(s.lat)-1)]) / 1e6
	}
	return bench.Row{
		"name": name, "value_bytes": o.ValueSize, "concurrency": o.Concurrency,
		"ops_per_s": float64(s.ops) / s.elapsed.Seconds(), "gbps": s.gbps(),
		"p50_ms": q(0.50), "p99_ms": q(0.99), "p999_ms": q(0.999), "errors": s.errs,
	}
}

// measure runs op from Concurrency goroutines for Duration with the
// configured mix and collects per-operation counts and latencies.
func measure(ctx context.Context, o Options, tick func(), op func(w int, rng *rand.Rand, buf []byte, put bool, i uint64) error) (map[string]*opStats, error) {
	type result struct {
		get, put opStats
		err      error
	}
	results := make([]result, o.Concurrency)
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := range o.Concurrency {
		wg.Go(func() {
			r := &results[w]
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			buf := make([]byte, o.ValueSize)
			for i := uint64(0); time.Now().Before(deadline) && ctx.Err() == nil && !failed.Load(); i++ {
				put := rng.IntN(o.GetWeight+o.PutWeight) >= o.GetWeight
				s := &r.get
				if put {
					s = &r.put
				}
				t0 := time.Now()
				if err := op(w, rng, buf, put, i); err != nil {
					s.errs++
					if s.errs > 100 || errors.Is(err, client.ErrNoSpace) {
						r.err = err
						failed.Store(true)
					}
					continue
				}
				s.lat = append(s.lat, time.Since(t0))
				s.ops++
				s.bytes += o.ValueSize
			}
		})
	}
	stop := make(chan struct{})
	var tw sync.WaitGroup
	tw.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for n := int64(0); n < int64(o.Duration/(100*time.Millisecond)); n++ {
			select {
			case <-stop:
				return
			case <-t.C:
				tick()
			}
		}
	})
	wg.Wait()
	close(stop)
	tw.Wait()
	elapsed := time.Since(start)
	out := map[string]*opStats{}
	for _, r := range results {
		if r.err != nil {
			return nil, fmt.Errorf("bench: %w", r.err)
		}
		for name, s := range map[string]opStats{"get": r.get, "put": r.put} {
			if s.ops == 0 && s.errs == 0 {
				continue
			}
			t := out[name]
			if t == nil {
				t = &opStats{elapsed: elapsed}
				out[name] = t
			}
			t.ops += s.ops
			t.errs += s.errs
			t.bytes += s.bytes
			t.lat = append(t.lat, s.lat...)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// tcpBaseline moves the same bytes per operation over raw loopback TCP:
// a get is a 1-byte request answered with ValueSize bytes, a put
// ValueSize bytes answered with 1 byte. One connection per worker.
func tcpBaseline(ctx context.Context, o Options, tick func()) (map[string]*opStats, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	value := bench.RandomBytes(43, o.ValueSize)
	var srv sync.WaitGroup
	var conns sync.Map
	srv.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(conn, true)
			srv.Go(func() {
				defer conn.Close()
				buf := make([]byte, o.ValueSize)
				var req [1]byte
				for {
					if _, err := io.ReadFull(conn, req[:]); err != nil {
						return
					}
					if req[0] == 'g' {
						if _, err := conn.Write(value); err != nil {
							return
						}
						continue
					}
					if _, err := io.ReadFull(conn, buf); err != nil {
						return
					}
					if _, err := conn.Write(req[:]); err != nil {
						return
					}
				}
			})
		}
	})
	defer func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		srv.Wait()
	}()
	clients := make([]net.Conn, o.Concurrency)
	for i := range clients {
		if clients[i], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			return nil, err
		}
		defer clients[i].Close()
	}
	return measure(ctx, o, tick, func(w int, _ *rand.Rand, buf []byte, put bool, _ uint64) error {
		conn := clients[w]
		if put {
			if _, err := conn.Write([]byte{'p'}); err != nil {
				return err
			}
			if _, err := conn.Write(value); err != nil {
				return err
			}
			_, err := io.ReadFull(conn, buf[:1])
			return err
		}
		if _, err := conn.Write([]byte{'g'}); err != nil {
			return err
		}
		_, err := io.ReadFull(conn, buf)
		return err
	})
}
