package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuebing/yuebing/server/resp"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
)

// The memory row: N small keys loaded into a node given a DRAM budget and
// into redis-server, and what each key costs in each. yuebing's figure is
// the growth of this process's live Go heap (runtime.MemStats.HeapAlloc
// after a collection), redis-server's the growth of its used_memory (what
// its allocator handed out): both count the allocators' size-class
// rounding and neither counts free memory the process holds.

// DefaultMemoryKeys and QuickMemoryKeys are Options.MemoryKeys's defaults.
const (
	DefaultMemoryKeys = 10_000_000
	QuickMemoryKeys   = 200_000
)

// memoryKey is the i-th key of the memory row: redis-benchmark's
// "key:__rand_int__" form, 16 bytes.
func memoryKey(dst []byte, i int) []byte {
	dst = append(dst, "key:"...)
	n := len(dst)
	dst = strconv.AppendInt(dst, int64(i), 10)
	// Zero-pad to 12 digits as redis-benchmark does.
	if d := len(dst) - n; d < 12 {
		dst = append(dst, make([]byte, 12-d)...)
		copy(dst[n+12-d:], dst[n:n+d])
		for j := n; j < n+12-d; j++ {
			dst[j] = '0'
		}
	}
	return dst
}

// loadKeys SETs keys [0, n) to val over conns connections, pipelining
// batches of 1000 commands, and checks every reply is +OK.
func loadKeys(ctx context.Context, addr string, n, conns int, val []byte) error {
	const batch = 1000
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range conns {
		wg.Go(func() {
			if err := loadRange(ctx, addr, w, conns, n, batch, val); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadRange loads the batches w, w+step, ... of [0, n).
func loadRange(ctx context.Context, addr string, w, step, n, batch int, val []byte) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	br := bufio.NewReaderSize(nc, 64<<10)
	var buf, key []byte
	for start := w * batch; start < n; start += step * batch {
		buf = buf[:0]
		end := min(start+batch, n)
		for i := start; i < end; i++ {
			key = memoryKey(key[:0], i)
			buf = fmt.Appendf(buf, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(key), key, len(val))
			buf = append(append(buf, val...), "\r\n"...)
		}
		if _, err := nc.Write(buf); err != nil {
			return fmt.Errorf("loading keys: %w", err)
		}
		for i := start; i < end; i++ {
			line, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("loading keys: %w", err)
			}
			if line != "+OK\r\n" {
				return fmt.Errorf("loading keys: SET answered %q", strings.TrimSpace(line))
			}
		}
	}
	return nil
}

// infoField sends INFO section to addr and returns field's value.
func infoField(ctx context.Context, addr, section, field string) (int64, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(nc, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section)
	br := bufio.NewReader(nc)
	head, err := br.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO %s has no %s", section, field)
}

// liveHeap is the live Go heap after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// MemoryResult is the memory row's figures.
type MemoryResult struct {
	Keys             int
	BytesPerKey      float64 // yuebing's live heap growth per key
	ChargedPerKey    float64 // what each key counts against the DRAM budget
	RedisBytesPerKey float64
	DRAMBytes        int64 // the node's budget
	DRAMUsed         int64 // its DRAM tier's used bytes after loading, the inline reservation included
	Fits             bool  // every key kept, nothing evicted, DRAMUsed within DRAMBytes
	LoadSeconds      float64
	RedisLoadSeconds float64
}

// measureMemory loads keys 28-byte (size) values into a fresh node whose
// DRAM tier is budget bytes, its inline values allowed all of it, and into
// a fresh redis-server, and returns what each key costs in each.
func measureMemory(ctx context.Context, o Options, dir string, keys int, size int64, budget int64) (MemoryResult, error) {
	res := MemoryResult{Keys: keys, DRAMBytes: budget}
	val := flowValue(size)
	quiet := slog.New(slog.DiscardHandler)
	d, err := dram.New(dram.Options{Capacity: budget, Logger: quiet})
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	s, err := ssd.Open(ssd.Options{Dir: filepath.Join(dir, "memory-ssd"), Capacity: 64 << 20, Logger: quiet})
	if err != nil {
		d.Close()
		return res, fmt.Errorf("bench: %w", err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{Logger: quiet})
	if err != nil {
		d.Close()
		s.Close()
		return res, fmt.Errorf("bench: %w", err)
	}
	defer h.Close()
	srv, err := resp.NewServer(resp.Options{Store: h, Logger: quiet, InlineCapacity: budget})
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	defer func() {
		// Keys are not kept: a shutdown would write every inline value
		// as a block.
		sctx, cancel := context.WithCancel(context.Background())
		cancel()
		srv.Shutdown(sctx)
		<-done
	}()
	conns := max(2, runtime.GOMAXPROCS(0))
	before := liveHeap()
	start := time.Now()
	if err := loadKeys(ctx, ln.Addr().String(), keys, conns, val); err != nil {
		return res, fmt.Errorf("bench: yuebing: %w", err)
	}
	res.LoadSeconds = time.Since(start).Seconds()
	grew := liveHeap() - before
	st := srv.Stats()
	// Per key kept: a budget too small for them all evicted some.
	kept := max(st.Keys, 1)
	res.BytesPerKey = float64(grew) / float64(kept)
	res.ChargedPerKey = float64(st.InlineBytes) / float64(kept)
	res.DRAMUsed = d.Stats().Used
	res.Fits = st.Keys == int64(keys) && st.EvictedKeys == 0 && res.DRAMUsed <= budget

	rs, _, stopRS, err := startRedisServer(ctx, o.RedisServer, filepath.Join(dir, "memory-redis"), 1)
	if err != nil {
		return res, err
	}
	defer stopRS()
	used0, err := infoField(ctx, rs, "memory", "used_memory")
	if err != nil {
		return res, fmt.Errorf("bench: redis-server: %w", err)
	}
	start = time.Now()
	if err := loadKeys(ctx, rs, keys, conns, val); err != nil {
		return res, fmt.Errorf("bench: redis-server: %w", err)
	}
	res.RedisLoadSeconds = time.Since(start).Seconds()
	used1, err := infoField(ctx, rs, "memory", "used_memory")
	if err != nil {
		return res, fmt.Errorf("bench: redis-server: %w", err)
	}
	res.RedisBytesPerKey = float64(used1-used0) / float64(keys)
	return res, nil
}
