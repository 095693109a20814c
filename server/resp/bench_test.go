package resp

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuebing/yuebing/tier"
)

// TestKeyTableMemory measures what the key table costs per key, the figure
// docs/resp.md gives, and keeps it from growing unnoticed.
func TestKeyTableMemory(t *testing.T) {
	n := 100000
	if testing.Short() {
		n = 20000
	}
	ks := newKeyspace()
	sp := ks.space("default/redis")
	name := func(i int) []byte { return fmt.Appendf(nil, "vllm@Llama-3.1-8B@1@0@%016xkv_bytes", i) }
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := range n {
		nm := name(i)
		e := newEntryOf(sp, nm, "", nil, &blockRef{key: blockKey(sp.name, nm, uint64(i)), size: 1})
		ks.swap(nil, e)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := float64(m1.HeapAlloc-m0.HeapAlloc) / float64(n)
	keyLen := len(sp.name) + len(name(0))
	t.Logf("%.0f bytes per key (namespace + key: %d bytes)", per, keyLen)
	if per > float64(256+2*keyLen) {
		t.Errorf("%.0f bytes per key, more than 256 + twice the %d bytes of namespace and key", per, keyLen)
	}
	if got := sp.keys.Load(); got != int64(n) {
		t.Errorf("%d keys counted, want %d", got, n)
	}
	runtime.KeepAlive(ks)
}

var sinkInt int64

// BenchmarkExpire measures the choice behind EXPIRE: the new deadline goes
// into the in-memory key table (table); the alternative, persisting it by
// rewriting the value's block under a new record, costs a put and a delete
// of the value (rewrite_<size>), measured in the same run as the baseline.
func BenchmarkExpire(b *testing.B) {
	st := testStore(b, 256<<20, 64<<20)
	defer st.Close()
	ks := newKeyspace()
	sp := ks.space("default/redis")
	e := newEntryOf(sp, []byte("k"), "", nil, &blockRef{key: blockKey(sp.name, []byte("k"), 1)})
	ks.swap(nil, e)
	b.Run("table", func(b *testing.B) {
		b.ReportAllocs()
		at := int64(1 << 40)
		for b.Loop() {
			at++
			ks.setExpiry(e, at)
			if ks.exp.h.Len() > 1<<16 {
				ks.compactExpiry()
			}
		}
		sinkInt = at
	})
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("rewrite_%d", size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			ctx := context.Background()
			v := make([]byte, size)
			gen := uint64(1)
			prev := blockKey(sp.name, []byte("r"), gen)
			rec := record{gen: gen, ns: sp.name, name: "r"}
			if _, err := st.Put(ctx, prev, v, tier.PutOptions{Meta: rec.appendTo(nil)}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				gen++
				rec := record{gen: gen, expireAt: int64(gen), ns: sp.name, name: "r"}
				k := blockKey(sp.name, []byte("r"), gen)
				h, _, err := st.Get(ctx, prev)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := st.Put(ctx, k, h.Bytes(), tier.PutOptions{Meta: rec.appendTo(nil)}); err != nil {
					b.Fatal(err)
				}
				h.Release()
				st.Delete(prev)
				prev = k
			}
		})
	}
}

// BenchmarkSetGet is the whole path over loopback TCP, one connection, one
// command at a time: parse, store, reply.
func BenchmarkSetGet(b *testing.B) {
	s := startServer(b, Options{Store: testStore(b, 512<<20, 64<<20)})
	for _, size := range []int{4 << 10, 1 << 20} {
		c := dial(b, s.addr)
		set := multibulk("SET", "k", strings.Repeat("v", size))
		get := multibulk("GET", "k")
		b.Run(fmt.Sprintf("set_%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				c.send(set)
				if r := c.reply(); r != "+OK\r\n" {
					b.Fatal(r)
				}
			}
		})
		b.Run(fmt.Sprintf("get_%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				c.send(get)
				sinkInt += int64(len(c.reply()))
			}
		})
	}
}

// BenchmarkInline measures what InlineMax is chosen by: the CPU cost of a
// SET and a GET of one key, without the network, for values kept inline
// and the same values in blocks of a DRAM tier.
func BenchmarkInline(b *testing.B) {
	for _, mode := range []struct {
		name string
		max  int
	}{{"inline", smallArg}, {"block", -1}} {
		for _, size := range []int{28, 1 << 10, 2 << 10, 4 << 10, 8 << 10} { // below zeroCopyMin: replies go to c.out
			st := testStore(b, 512<<20, 64<<20)
			s := startServer(b, Options{Store: st, InlineMax: mode.max, InlineCapacity: 256 << 20})
			a, p := net.Pipe()
			c := s.newConn(a)
			defer a.Close()
			defer p.Close()
			name := []byte("key:000000000001")
			val := []byte(strings.Repeat("v", size))
			b.Run(fmt.Sprintf("set_%s_%d", mode.name, size), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					c.out = c.out[:0]
					if err := c.setSmall(name, val, setOpts{}, true); err != nil || string(c.out) != "+OK\r\n" {
						b.Fatal(err, string(c.out))
					}
				}
			})
			b.Run(fmt.Sprintf("get_%s_%d", mode.name, size), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size))
				for b.Loop() {
					c.out = c.out[:0]
					if _, err := c.get(name); err != nil {
						b.Fatal(err)
					}
				}
				sinkInt += int64(len(c.out))
			})
			st.Close()
		}
	}
}

// BenchmarkLMCacheFlow is LMCache's redis:// connector's traffic: a save
// is SET <k>kv_bytes then SET <k>metadata (28 bytes); a load is EXISTS
// <k>metadata, GET <k>metadata, GET <k>kv_bytes. Chunks are 256 tokens of
// Mistral-7B's KV cache (32 layers, 8 KV heads of 128, fp16: 2 x 32 x 8 x
// 128 x 256 x 2 bytes = 32 MiB), saved and loaded by 8 connections at
// once (the resp:// connector's 8 threads), against this server (DRAM + SSD store, in this process) and
// Debian's redis-server in the same run. It reports chunks per second.
//
//	go test ./server/resp -run '^$' -bench LMCacheFlow -benchtime 64x
func BenchmarkLMCacheFlow(b *testing.B) {
	const (
		chunk = 2 * 32 * 8 * 128 * 256 * 2
		conns = 8
		keys  = 16 // 512 MiB of chunks: both servers hold them all
	)
	st := testStore(b, 2<<30, 4<<30)
	defer st.Close()
	servers := []struct{ name, addr string }{{"yuebing", startServer(b, Options{Store: st}).addr}, {"redis-server", redisServer(b)}}
	kv := chunkValue(chunk, 1)
	md := chunkValue(28, 2)
	for round := range 2 {
		for i := range servers {
			sv := servers[(i+round)%len(servers)] // alternate who goes first
			cs := make([]*rawConn, conns)
			for i := range cs {
				cs[i] = dial(b, sv.addr)
			}
			// A 32 MiB reply may wait long behind seven others: redis-server
			// writes 64 KiB per client per event loop round.
			reply := func(c *rawConn) string {
				c.nc.SetReadDeadline(time.Now().Add(5 * time.Minute))
				var sb strings.Builder
				if err := readReply(c.br, &sb); err != nil {
					return "error: " + err.Error()
				}
				return sb.String()
			}
			do := func(c *rawConn, args ...string) string {
				c.send(multibulk(args...))
				return reply(c)
			}
			run := func(b *testing.B, op func(c *rawConn, k string) error) {
				b.SetBytes(chunk)
				var next atomic.Int64
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Go(func() {
						for {
							n := next.Add(1) - 1
							if n >= int64(b.N) {
								return
							}
							if err := op(c, fmt.Sprintf("vllm@Mistral-7B@1@0@%016x", n%keys)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
			}
			b.Run(sv.name+"/save", func(b *testing.B) {
				run(b, func(c *rawConn, k string) error {
					// The value is sent as it is, not copied into a request.
					c.send(fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%skv_bytes\r\n$%d\r\n", len(k)+8, k, chunk))
					c.send(kv)
					c.send("\r\n")
					if r := reply(c); r != "+OK\r\n" {
						return fmt.Errorf("SET kv_bytes: %q", r)
					}
					if r := do(c, "SET", k+"metadata", md); r != "+OK\r\n" {
						return fmt.Errorf("SET metadata: %q", r)
					}
					return nil
				})
			})
			b.Run(sv.name+"/load", func(b *testing.B) {
				run(b, func(c *rawConn, k string) error {
					if r := do(c, "EXISTS", k+"metadata"); r != ":1\r\n" {
						return fmt.Errorf("EXISTS: %q", r)
					}
					if r := do(c, "GET", k+"metadata"); len(r) != len("$28\r\n\r\n")+28 {
						return fmt.Errorf("GET metadata: %.40q", r)
					}
					if r := do(c, "GET", k+"kv_bytes"); len(r) != len(fmt.Sprintf("$%d\r\n\r\n", chunk))+chunk {
						return fmt.Errorf("GET kv_bytes: %d bytes", len(r))
					}
					return nil
				})
			})
		}
	}
}
