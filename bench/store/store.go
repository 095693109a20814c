package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/bench"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
)

// Options configures `yuebing bench store`.
type Options struct {
	// Dir is where the SSD cases write. Default: a new directory under
	// os.TempDir(), removed afterwards.
	Dir string
	// Sizes of the blocks measured. Default 64 KiB, 1 MiB, 16 MiB.
	Sizes []int64
	// Goroutines are the concurrency levels measured. Default 1 and 2.
	Goroutines []int
	// Duration of each measurement (and of its baseline). Default 1s.
	Duration time.Duration
	// IndexEntries is the index size for the prefix match. Default 10M.
	IndexEntries int
	// Quick shrinks every case (200ms each, a 1M-entry index) to finish in
	// well under a minute.
	Quick bool
	// Progress, if set, is advanced once per measured case.
	Progress *bench.Progress
}

func (o *Options) ensureDefaults() {
	if len(o.Sizes) == 0 {
		o.Sizes = []int64{64 << 10, 1 << 20, 16 << 20}
	}
	if len(o.Goroutines) == 0 {
		o.Goroutines = []int{1, 2}
	}
	if o.Duration == 0 {
		o.Duration = time.Second
		if o.Quick {
			o.Duration = 200 * time.Millisecond
		}
	}
	if o.IndexEntries == 0 {
		o.IndexEntries = 10_000_000
		if o.Quick {
			o.IndexEntries = 1_000_000
		}
	}
}

// Cases is how many rows Run produces for the options, for a
// progress bar.
func Cases(o Options) int {
	o.ensureDefaults()
	return 4*len(o.Sizes)*len(o.Goroutines) + 1
}

// Run measures the DRAM and SSD tiers and the index, each against a
// baseline measured in the same run: copy() of the same bytes for DRAM,
// raw write+fdatasync and cold pread of the same bytes for SSD, Go's
// built-in map for the prefix match.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	o.ensureDefaults()
	rep := &bench.Report{Columns: []string{"name", "block_bytes", "goroutines", "gbps", "baseline", "baseline_gbps", "ratio"}}
	rep.Human = bench.HumanColumns["store"]
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "yuebing-bench-store-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	step := func() {
		if o.Progress != nil {
			o.Progress.Add(1)
		}
	}
	for _, size := range o.Sizes {
		for _, g := range o.Goroutines {
			for _, run := range []func(context.Context, Options, int64, int) (bench.Row, error){dramPut, dramGet} {
				row, err := run(ctx, o, size, g)
				if err != nil {
					return nil, err
				}
				rep.Add(row)
				step()
			}
		}
	}
	for _, size := range o.Sizes {
		for _, g := range o.Goroutines {
			for _, run := range []func(context.Context, Options, string, int64, int) (bench.Row, error){ssdPut, ssdGet} {
				row, err := run(ctx, o, dir, size, g)
				if err != nil {
					return nil, err
				}
				rep.Add(row)
				step()
			}
		}
	}
	row, err := prefixMatch(ctx, o)
	if err != nil {
		return nil, err
	}
	rep.Add(row)
	step()
	return rep, nil
}

func storeRow(name string, size int64, g int, gbps float64, baseline string, baseGbps float64) bench.Row {
	return bench.Row{
		"name": name, "block_bytes": size, "goroutines": g, "gbps": gbps,
		"baseline": baseline, "baseline_gbps": baseGbps, "ratio": gbps / baseGbps,
	}
}

// throughput runs op from g goroutines for d and returns GB/s (1e9 bytes).
// op returns the bytes it moved.
func throughput(ctx context.Context, g int, d time.Duration, op func(goroutine, i int) (int64, error)) (float64, error) {
	var total atomic.Int64
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				n, err := op(w, i)
				if err != nil {
					once.Do(func() { firstErr = err })
					cancel()
					return
				}
				total.Add(n)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(total.Load()) / time.Since(start).Seconds() / 1e9, nil
}

// hugeRegion maps n bytes the way the DRAM tier maps its arena (anonymous,
// transparent huge pages) and touches them, so copy() baselines run on
// memory of the same kind as the tier's.
func hugeRegion(n int64) ([]byte, func(), error) {
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: mapping a baseline region: %w", err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	for i := 0; i < len(b); i += 4096 {
		b[i] = byte(i)
	}
	return b, func() { unix.Munmap(b) }, nil
}

// dramCapacity holds many blocks of the size (so the working set is past the
// CPU caches, as in a real cache) but stays modest on small machines.
func dramCapacity(o Options, size int64, g int) int64 {
	c := int64(512 << 20)
	if o.Quick {
		c = 128 << 20
	}
	return max(c, 8*size*int64(g))
}

// dramPut puts new keys into a full tier (each put evicts, as in steady
// state) against copy() into a pre-touched region of the same capacity.
func dramPut(ctx context.Context, o Options, size int64, g int) (bench.Row, error) {
	capacity := dramCapacity(o, size, g)
	// Prefaulted, as a node that has run a while has its arena: the
	// timed puts and gets never meet a first-touch page fault.
	d, err := dram.New(dram.Options{Capacity: capacity, MaxBlockSize: size, Prefault: true})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	src := make([][]byte, g)
	for w := range src {
		src[w] = bench.RandomBytes(uint64(w), size)
	}
	// Fill the tier once so every page of the arena is touched.
	for i := int64(0); i < capacity/size; i++ {
		if err := d.Put(ctx, bench.Key(uint64(i)|1<<62), src[0], tier.PutOptions{}); err != nil {
			return nil, err
		}
	}
	gbps, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		return size, d.Put(ctx, bench.Key(uint64(w)<<40|uint64(i)), src[w], tier.PutOptions{})
	})
	if err != nil {
		return nil, fmt.Errorf("bench: dram put: %w", err)
	}
	region, unmap, err := hugeRegion(capacity)
	if err != nil {
		return nil, err
	}
	defer unmap()
	slots := capacity / size / int64(g)
	base, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		off := (int64(w)*slots + int64(i)%slots) * size
		copy(region[off:off+size], src[w])
		return size, nil
	})
	if err != nil {
		return nil, err
	}
	return storeRow("dram_put", size, g, gbps, "copy", base), nil
}

// dramGet reads blocks through a pinned handle into a caller buffer against
// copy() from a region of the same capacity into the same buffer.
func dramGet(ctx context.Context, o Options, size int64, g int) (bench.Row, error) {
	capacity := dramCapacity(o, size, g)
	// Prefaulted, as a node that has run a while has its arena: the
	// timed puts and gets never meet a first-touch page fault.
	d, err := dram.New(dram.Options{Capacity: capacity, MaxBlockSize: size, Prefault: true})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	n := capacity/size - 1
	v := bench.RandomBytes(7, size)
	for i := int64(0); i < n; i++ {
		if err := d.Put(ctx, bench.Key(uint64(i)), v, tier.PutOptions{}); err != nil {
			return nil, err
		}
	}
	bufs := make([][]byte, g)
	for w := range bufs {
		bufs[w] = bench.RandomBytes(uint64(w), size)
	}
	gbps, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		h, err := d.Get(ctx, bench.Key(uint64((int64(w)*n/int64(g)+int64(i))%n)))
		if err != nil {
			return 0, err
		}
		copy(bufs[w], h.Bytes())
		h.Release()
		return size, nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: dram get: %w", err)
	}
	region, unmap, err := hugeRegion(capacity)
	if err != nil {
		return nil, err
	}
	defer unmap()
	for off := int64(0); off+size <= capacity; off += size {
		copy(region[off:], v)
	}
	base, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		off := ((int64(w)*n/int64(g) + int64(i)) % n) * size
		copy(bufs[w], region[off:off+size])
		return size, nil
	})
	if err != nil {
		return nil, err
	}
	return storeRow("dram_get", size, g, gbps, "copy", base), nil
}

func ssdCapacity(o Options, size int64, g int) int64 {
	c := int64(2 << 30)
	if o.Quick {
		c = 512 << 20
	}
	return max(c, 16*size*int64(g))
}

// ssdPut makes durable puts of new keys against appending the same bytes to
// a plain file with write+fdatasync, one file per goroutine. Both append:
// overwriting in place would spare the baseline the file-size updates an
// appending log pays at every flush.
func ssdPut(ctx context.Context, o Options, dir string, size int64, g int) (bench.Row, error) {
	tdir, err := os.MkdirTemp(dir, "ssd-put-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tdir)
	s, err := ssd.Open(ssd.Options{Dir: tdir, Capacity: ssdCapacity(o, size, g), MaxBlockSize: size})
	if err != nil {
		return nil, err
	}
	src := make([][]byte, g)
	for w := range src {
		src[w] = bench.RandomBytes(uint64(w)+100, size)
	}
	gbps, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		return size, s.Put(ctx, bench.Key(uint64(w)<<40|uint64(i)), src[w], tier.PutOptions{})
	})
	s.Close()
	if err != nil {
		return nil, fmt.Errorf("bench: ssd put: %w", err)
	}
	files := make([]*os.File, g)
	for w := range files {
		f, err := os.Create(filepath.Join(tdir, fmt.Sprintf("raw-%d", w)))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		files[w] = f
	}
	limit := ssdCapacity(o, size, g) / int64(g)
	base, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		f := files[w]
		off := int64(i) * size % limit
		if off == 0 && i > 0 {
			if err := f.Truncate(0); err != nil { // start over, still appending
				return 0, err
			}
		}
		if _, err := f.WriteAt(src[w], off); err != nil {
			return 0, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
		_ = unix.Fadvise(int(f.Fd()), off, size, unix.FADV_DONTNEED)
		return size, nil
	})
	if err != nil {
		return nil, err
	}
	return storeRow("ssd_put", size, g, gbps, "write+fdatasync", base), nil
}

// ssdGet reads blocks that are not in the page cache (the tier drops its
// pages; the baseline file is dropped the same way) against pread of the
// same bytes from a plain file.
func ssdGet(ctx context.Context, o Options, dir string, size int64, g int) (bench.Row, error) {
	tdir, err := os.MkdirTemp(dir, "ssd-get-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tdir)
	total := int64(512 << 20)
	if o.Quick {
		total = 128 << 20
	}
	n := max(total/size, 8)
	s, err := ssd.Open(ssd.Options{Dir: tdir, Capacity: max(2*n*size, 64<<20), MaxBlockSize: size})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	v := bench.RandomBytes(11, size)
	for i := int64(0); i < n; i++ {
		if err := s.Put(ctx, bench.Key(uint64(i)), v, tier.PutOptions{}); err != nil {
			return nil, err
		}
	}
	// Visit blocks in a scrambled order, the same for tier and baseline,
	// so neither gets the device's sequential read-ahead for free.
	order := rand.New(rand.NewPCG(3, 4)).Perm(int(n))
	gbps, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		h, err := s.Get(ctx, bench.Key(uint64(order[(w*int(n)/g+i)%int(n)])))
		if err != nil {
			return 0, err
		}
		h.Release()
		return size, nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: ssd get: %w", err)
	}
	f, err := os.Create(filepath.Join(tdir, "raw"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for i := int64(0); i < n; i++ {
		if _, err := f.WriteAt(v, i*size); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	_ = unix.Fadvise(int(f.Fd()), 0, n*size, unix.FADV_DONTNEED)
	// Read-ahead off, as the tier has it: otherwise each read would leave the
	// start of the next block cached and the baseline would read it warm.
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	bufs := make([][]byte, g)
	for w := range bufs {
		bufs[w] = make([]byte, size)
	}
	base, err := throughput(ctx, g, o.Duration, func(w, i int) (int64, error) {
		off := int64(order[(w*int(n)/g+i)%int(n)]) * size
		if _, err := f.ReadAt(bufs[w], off); err != nil {
			return 0, err
		}
		_ = unix.Fadvise(int(f.Fd()), off, size, unix.FADV_DONTNEED)
		return size, nil
	})
	if err != nil {
		return nil, err
	}
	return storeRow("ssd_get", size, g, gbps, "pread", base), nil
}

// prefixMatch times a 512-key chain match against an index of IndexEntries
// blocks, and the same lookups in a Go map holding the same entries.
func prefixMatch(ctx context.Context, o Options) (bench.Row, error) {
	const chainLen = 512
	n := o.IndexEntries
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := index.New(index.Options{})
	for i := range n {
		ix.Set(bench.Key(uint64(i)), index.Entry{Tiers: 1, Size: 1 << 20})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heapPerEntry := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	chain := make([]block.Key, chainLen)
	for i := range chain {
		chain[i] = bench.Key(uint64(i * (n / chainLen)))
	}
	lat, err := latencies(ctx, o.Duration, func() error {
		if m := ix.PrefixMatch(chain); m.Len != chainLen {
			return fmt.Errorf("bench: prefix match found %d of %d", m.Len, chainLen)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	row := bench.Row{
		"name": "prefix_match", "entries": n, "chain_len": chainLen, "goroutines": 1,
		"p50_us": pct(lat, 0.50), "p99_us": pct(lat, 0.99),
		"bytes_per_entry": heapPerEntry, "index_bytes_per_entry": float64(ix.MemoryBytes()) / float64(n),
	}
	runtime.KeepAlive(ix)
	ix = nil

	runtime.GC()
	runtime.ReadMemStats(&before)
	m := make(map[block.Key]index.Entry)
	for i := range n {
		m[bench.Key(uint64(i))] = index.Entry{Tiers: 1, Size: 1 << 20}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	base, err := latencies(ctx, o.Duration, func() error {
		found := 0
		for _, k := range chain {
			if _, ok := m[k]; !ok {
				break
			}
			found++
		}
		if found != chainLen {
			return errors.New("bench: map lookup lost keys")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	row["baseline"] = "go_map"
	row["baseline_p50_us"] = pct(base, 0.50)
	row["baseline_bytes_per_entry"] = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	row["ratio"] = pct(base, 0.50) / pct(lat, 0.50)
	runtime.KeepAlive(m)
	return row, nil
}

// latencies runs op repeatedly for d and returns each call's duration in
// microseconds, sorted.
func latencies(ctx context.Context, d time.Duration, op func() error) ([]float64, error) {
	var lat []float64
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		t0 := time.Now()
		if err := op(); err != nil {
			return nil, err
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	slices.Sort(lat)
	return lat, ctx.Err()
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(p*float64(len(sorted))), len(sorted)-1)]
}
