package resp

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// LMCache's fast clients compare replies literally. Its C++ resp://
// connector sends one request at a time per socket from 8 threads and
// expects SET to answer exactly "+OK\r\n", GET a bulk of the chunk's size
// or "$-1\r\n", EXISTS ":0\r\n" or ":1\r\n". valkey-glide (its valkey://)
// opens every connection with HELLO 3, CLIENT SETINFO and SELECT 0. The
// sessions below are run against this server and Debian's redis-server
// and must get the same bytes from both.

// chunkValue is binary like a KV chunk: every byte value, CRLFs included.
func chunkValue(n int, seed byte) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return string(b)
}

// lmcacheSession is the resp:// connector's traffic for one chunk of each
// size (around the inline and streaming thresholds, and 28-byte
// metadata), then valkey-glide's handshake and the same traffic in RESP3.
func lmcacheSession() [][]string {
	var s [][]string
	for i, n := range []int{28, DefaultInlineMax, DefaultInlineMax + 1, smallArg, smallArg + 1, 256 << 10} {
		k := fmt.Sprintf("vllm@Llama-3.1-8B@1@0@%016x", i)
		v := chunkValue(n, byte(i))
		s = append(s,
			[]string{"EXISTS", k + "kv_bytes"},
			[]string{"GET", k + "kv_bytes"},
			[]string{"SET", k + "kv_bytes", v},
			[]string{"SET", k + "metadata", chunkValue(28, 1)},
			[]string{"EXISTS", k + "metadata"},
			[]string{"GET", k + "metadata"},
			[]string{"GET", k + "kv_bytes"},
			[]string{"SET", k + "kv_bytes", v}, // a chunk saved twice
			[]string{"EXISTS", k + "kv_bytes", k + "metadata"},
		)
	}
	s = append(s,
		[]string{"HELLO", "3"},
		[]string{"SELECT", "0"},
		[]string{"GET", "missing"},
		[]string{"SET", "glide", chunkValue(100, 3)},
		[]string{"GET", "glide"},
		[]string{"EXISTS", "glide", "missing"},
		[]string{"HELLO", "2", "SETNAME", "lmcache"},
		[]string{"GET", "missing"},
		[]string{"DEL", "glide"},
	)
	return s
}

// helloID masks the connection id in HELLO's reply, which differs
// between two servers by how many clients each has seen.
var helloID = regexp.MustCompile(`\$2\r\nid\r\n:[0-9]+\r\n`)

func runSession(t *testing.T, addr string, steps [][]string) []string {
	t.Helper()
	c := dial(t, addr)
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = helloID.ReplaceAllString(c.do(st...), "$$2\r\nid\r\n:ID\r\n")
	}
	return out
}

// TestLMCacheRepliesMatchRedis: the resp:// connector's and
// valkey-glide's traffic gets redis-server's bytes.
func TestLMCacheRepliesMatchRedis(t *testing.T) {
	rs := redisServer(t)
	if got := dial(t, rs).do("FLUSHALL"); got != "+OK\r\n" {
		t.Fatalf("FLUSHALL: %q", got)
	}
	s := startServer(t, Options{})
	steps := lmcacheSession()
	want := runSession(t, rs, steps)
	got := runSession(t, s.addr, steps)
	for i := range steps {
		if got[i] != want[i] {
			t.Errorf("step %d %.60q:\n got %.120q\nwant %.120q", i, steps[i], got[i], want[i])
		}
	}
	// valkey-glide's CLIENT SETINFO came with Redis 7.2; redis-server 7.0
	// refuses it, and glide goes on either way. Here it is accepted.
	c := dial(t, s.addr)
	for _, args := range [][]string{{"CLIENT", "SETINFO", "LIB-NAME", "GlideRust"}, {"CLIENT", "SETINFO", "LIB-VER", "1.2.0"}} {
		if got := c.do(args...); got != "+OK\r\n" {
			t.Errorf("%q = %q", args, got)
		}
	}
}

// TestLMCacheConnectorThreads: the resp:// connector's 8 threads, one
// request in flight per socket, each saving and loading its own chunks
// while the others do: every reply is exact.
func TestLMCacheConnectorThreads(t *testing.T) {
	s := startServer(t, Options{})
	chunk := 128 << 10
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	var wg sync.WaitGroup
	for th := range 8 {
		wg.Go(func() {
			c := dial(t, s.addr)
			for r := range rounds {
				k := fmt.Sprintf("t%d@%d", th, r)
				v := chunkValue(chunk, byte(th+r))
				for _, st := range []struct {
					args []string
					want string
				}{
					{[]string{"EXISTS", k + "metadata"}, ":0\r\n"},
					{[]string{"SET", k + "kv_bytes", v}, "+OK\r\n"},
					{[]string{"SET", k + "metadata", v[:28]}, "+OK\r\n"},
					{[]string{"EXISTS", k + "metadata"}, ":1\r\n"},
					{[]string{"GET", k + "metadata"}, "$28\r\n" + v[:28] + "\r\n"},
					{[]string{"GET", k + "kv_bytes"}, fmt.Sprintf("$%d\r\n%s\r\n", chunk, v)},
					{[]string{"GET", k + "x"}, "$-1\r\n"},
				} {
					if got := c.do(st.args...); got != st.want {
						t.Errorf("thread %d %q: got %.60q, want %.60q", th, st.args[:2], got, st.want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if n := s.Stats().ErrorReplies; n != 0 {
		t.Errorf("%d error replies", n)
	}
	if !strings.Contains(dial(t, s.addr).do("DBSIZE"), fmt.Sprint(":", 8*rounds*2)) {
		t.Errorf("DBSIZE = %q, want %d", dial(t, s.addr).do("DBSIZE"), 8*rounds*2)
	}
}
