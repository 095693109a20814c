// Package tiertest is the conformance suite for tier.Tier implementations.
//
//	func TestConformance(t *testing.T) {
//		tiertest.RunSuite(t, func(t *testing.T, capacity int64) tier.Tier {
//			d, err := dram.New(dram.Options{Capacity: capacity})
//			...
//			return d
//		})
//	}
//
// Every implementation passes the same tests: round trips with checksums,
// dedup of existing keys, all-or-nothing writers, the capacity bound under
// sequential and concurrent load, pins that hold bytes and blocks in place,
// and the eviction hand-off.
package tiertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// Factory returns a new, empty tier with the given capacity in bytes. It
// registers its own cleanup (Close) with t.
type Factory func(t *testing.T, capacity int64) tier.Tier

// Capacity is the tier size the suite asks for: small enough that tests
// cross it quickly, large enough for several blocks of each test size.
const Capacity = 4 << 20

// RunSuite runs every conformance test against tiers made by newTier.
func RunSuite(t *testing.T, newTier Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"RoundTrip", testRoundTrip},
		{"Dedup", testDedup},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"Writer", testWriter},
		{"WriterReadFrom", testWriterReadFrom},
		{"Checksum", testChecksum},
		{"Meta", testMeta},
		{"TooLarge", testTooLarge},
		{"CapacityBound", testCapacityBound},
		{"HandleOutlivesEviction", testHandleOutlivesEviction},
		{"HandleOutlivesDelete", testHandleOutlivesDelete},
		{"SoftPin", testSoftPin},
		{"Range", testRange},
		{"Stats", testStats},
		{"EvictHandler", testEvictHandler},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newTier) })
	}
}

// Key returns a deterministic key for n.
func Key(n int) block.Key {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	return sha256.Sum256(b[:])
}

// Value returns size deterministic bytes for key k, so any reader can check
// what it got without remembering what was written.
func Value(k block.Key, size int) []byte {
	v := make([]byte, size)
	r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:16])))
	for i := 0; i < size; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(v[i:], w[:])
	}
	return v
}

func mustPut(t *testing.T, tr tier.Tier, k block.Key, v []byte) {
	t.Helper()
	if err := tr.Put(t.Context(), k, v, tier.PutOptions{}); err != nil {
		t.Fatalf("Put %v (%d bytes): %v", k, len(v), err)
	}
}

// CheckGet asserts that k reads back as want, with a matching checksum.
func CheckGet(t *testing.T, tr tier.Tier, k block.Key, want []byte) {
	t.Helper()
	h, err := tr.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get %v: %v", k, err)
	}
	defer h.Release()
	if !bytes.Equal(h.Bytes(), want) {
		t.Fatalf("Get %v: %d bytes differ from the %d written", k, h.Len(), len(want))
	}
	if h.Checksum() != block.Checksum(want) {
		t.Fatalf("Get %v: checksum %08x, want %08x", k, h.Checksum(), block.Checksum(want))
	}
}

func testRoundTrip(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	for i, size := range []int{0, 1, 63, 64, 65, 4096, 100_000, 1 << 20} {
		k := Key(i)
		v := Value(k, size)
		mustPut(t, tr, k, v)
		CheckGet(t, tr, k, v)
		info, err := tr.Stat(k)
		if err != nil || info.Size != int64(size) || info.HasChecksum && info.Checksum != block.Checksum(v) {
			t.Fatalf("Stat of %d-byte block = %+v, %v", size, info, err)
		}
	}
}

func testDedup(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(1)
	v := Value(k, 1000)
	mustPut(t, tr, k, v)
	other := bytes.Repeat([]byte{7}, 1000)
	if err := tr.Put(t.Context(), k, other, tier.PutOptions{}); !errors.Is(err, tier.ErrExists) {
		t.Fatalf("second Put = %v, want ErrExists", err)
	}
	CheckGet(t, tr, k, v)
	if _, err := tr.Create(t.Context(), k, 10, tier.PutOptions{}); !errors.Is(err, tier.ErrExists) {
		t.Fatalf("Create of an existing key = %v, want ErrExists", err)
	}
	// Two writers racing for one key: exactly one commits.
	k2 := Key(2)
	w1, err1 := tr.Create(t.Context(), k2, 100, tier.PutOptions{})
	w2, err2 := tr.Create(t.Context(), k2, 100, tier.PutOptions{})
	if err1 != nil || err2 != nil {
		t.Fatalf("Create: %v, %v", err1, err2)
	}
	v2 := Value(k2, 100)
	w1.Write(v2)
	w2.Write(v2)
	if err := w1.Commit(t.Context()); err != nil {
		t.Fatalf("first Commit: %v", err)
	}
	if err := w2.Commit(t.Context()); !errors.Is(err, tier.ErrExists) {
		t.Fatalf("second Commit = %v, want ErrExists", err)
	}
	CheckGet(t, tr, k2, v2)
}

func testNotFound(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(9)
	if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
	if _, err := tr.Stat(k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Stat = %v, want ErrNotFound", err)
	}
	if err := tr.Delete(k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Delete = %v, want ErrNotFound", err)
	}
	if err := tr.Pin(k, time.Now().Add(time.Hour)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Pin = %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(3)
	mustPut(t, tr, k, Value(k, 5000))
	if err := tr.Delete(k); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
	v := Value(Key(4), 5000) // a different value under the same key
	mustPut(t, tr, k, v)
	CheckGet(t, tr, k, v)
}

func testWriter(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(5)
	v := Value(k, 300_000)
	w, err := tr.Create(t.Context(), k, int64(len(v)), tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Not visible before Commit.
	for off := 0; off < len(v); off += 70_000 {
		if _, err := w.Write(v[off:min(off+70_000, len(v))]); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
			t.Fatalf("partially written block is visible: %v", err)
		}
	}
	if err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.Abort() // no-op after Commit
	CheckGet(t, tr, k, v)

	// Short: ErrSize, nothing stored.
	k2 := Key(6)
	w, _ = tr.Create(t.Context(), k2, 100, tier.PutOptions{})
	w.Write(make([]byte, 99))
	if err := w.Commit(t.Context()); !errors.Is(err, tier.ErrSize) {
		t.Fatalf("short Commit = %v, want ErrSize", err)
	}
	if _, err := tr.Get(t.Context(), k2); !errors.Is(err, tier.ErrNotFound) {
		t.Fatal("short block was stored")
	}
	// Long: the Write fails.
	w, _ = tr.Create(t.Context(), k2, 100, tier.PutOptions{})
	if _, err := w.Write(make([]byte, 101)); !errors.Is(err, tier.ErrSize) {
		t.Fatalf("overlong Write = %v, want ErrSize", err)
	}
	w.Abort()
	// Aborted: nothing stored, and the space comes back.
	before := tr.Stats().Used
	w, _ = tr.Create(t.Context(), k2, 1<<20, tier.PutOptions{})
	w.Write(make([]byte, 1<<20))
	w.Abort()
	if _, err := tr.Get(t.Context(), k2); !errors.Is(err, tier.ErrNotFound) {
		t.Fatal("aborted block was stored")
	}
	if after := tr.Stats().Used; after > before {
		t.Fatalf("Abort leaked space: used %d -> %d", before, after)
	}
}

func testWriterReadFrom(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(7)
	v := Value(k, 200_000)
	w, err := tr.Create(t.Context(), k, int64(len(v)), tier.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// iotest-style small reads exercise the loop.
	if n, err := w.ReadFrom(io.LimitReader(&slowReader{r: bytes.NewReader(v)}, int64(len(v)))); err != nil || n != int64(len(v)) {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	if err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	CheckGet(t, tr, k, v)

	k2 := Key(8)
	w, _ = tr.Create(t.Context(), k2, 10, tier.PutOptions{})
	if _, err := w.ReadFrom(strings.NewReader("this is more than ten bytes")); !errors.Is(err, tier.ErrSize) {
		t.Fatalf("ReadFrom of overlong input = %v, want ErrSize", err)
	}
	w.Abort()
	if _, err := tr.Get(t.Context(), k2); !errors.Is(err, tier.ErrNotFound) {
		t.Fatal("overlong block was stored")
	}
}

type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 7777)]) }

func testChecksum(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(10)
	v := Value(k, 10_000)
	bad := tier.PutOptions{Checksum: block.Checksum(v) ^ 1, HasChecksum: true}
	if err := tr.Put(t.Context(), k, v, bad); !errors.Is(err, tier.ErrChecksum) {
		t.Fatalf("Put with a wrong checksum = %v, want ErrChecksum", err)
	}
	if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatal("block with a wrong checksum was stored")
	}
	good := tier.PutOptions{Checksum: block.Checksum(v), HasChecksum: true}
	if err := tr.Put(t.Context(), k, v, good); err != nil {
		t.Fatalf("Put with the right checksum: %v", err)
	}
	CheckGet(t, tr, k, v)
}

func testMeta(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(12)
	meta := []byte("vllm@llama@1@0@abcdkv_bytes")
	if err := tr.Put(t.Context(), k, Value(k, 3000), tier.PutOptions{Meta: meta}); err != nil {
		t.Fatal(err)
	}
	if info, err := tr.Stat(k); err != nil || string(info.Meta) != string(meta) {
		t.Fatalf("Stat meta = %q, %v", info.Meta, err)
	}
	found := false
	tr.Range(func(kk block.Key, info tier.BlockInfo) bool {
		if kk == k {
			found = string(info.Meta) == string(meta)
		}
		return true
	})
	if !found {
		t.Fatal("Range does not return the metadata")
	}
	CheckGet(t, tr, k, Value(k, 3000))
	if err := tr.Put(t.Context(), Key(13), []byte("x"), tier.PutOptions{Meta: make([]byte, tier.MaxMeta+1)}); !errors.Is(err, tier.ErrMeta) {
		t.Fatalf("oversized metadata: %v", err)
	}
}

func testTooLarge(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	if err := tr.Put(t.Context(), Key(11), make([]byte, Capacity+1), tier.PutOptions{}); !errors.Is(err, tier.ErrTooLarge) {
		t.Fatalf("Put larger than capacity = %v, want ErrTooLarge", err)
	}
	if _, err := tr.Create(t.Context(), Key(11), Capacity+1, tier.PutOptions{}); !errors.Is(err, tier.ErrTooLarge) {
		t.Fatalf("Create larger than capacity = %v, want ErrTooLarge", err)
	}
}

// testCapacityBound writes three times the capacity and checks after every
// put that used bytes stay within capacity, the newest block is readable and
// something old was evicted.
func testCapacityBound(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	sizes := []int{1 << 10, 100_000, 300_000, 17}
	var keys []block.Key
	var total int
	for i := 0; total < 3*Capacity; i++ {
		k := Key(1000 + i)
		v := Value(k, sizes[i%len(sizes)])
		mustPut(t, tr, k, v)
		total += len(v)
		keys = append(keys, k)
		if st := tr.Stats(); st.Used > st.Capacity {
			t.Fatalf("after %d bytes: used %d > capacity %d", total, st.Used, st.Capacity)
		}
		CheckGet(t, tr, k, v)
	}
	if _, err := tr.Get(t.Context(), keys[0]); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("first block still present after 3x capacity was written: %v", err)
	}
	if st := tr.Stats(); st.Evictions == 0 {
		t.Fatal("no evictions counted")
	}
}

func testHandleOutlivesEviction(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(20)
	v := Value(k, 500_000)
	mustPut(t, tr, k, v)
	h, err := tr.Get(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*Capacity/100_000; i++ {
		kk := Key(2000 + i)
		mustPut(t, tr, kk, Value(kk, 100_000))
	}
	if !bytes.Equal(h.Bytes(), v) {
		t.Fatal("a held handle's bytes changed while the tier evicted")
	}
	h.Release()
}

func testHandleOutlivesDelete(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(21)
	v := Value(k, 300_000)
	mustPut(t, tr, k, v)
	h, err := tr.Get(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete(k); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*Capacity/300_000; i++ {
		kk := Key(2100 + i)
		mustPut(t, tr, kk, Value(kk, 300_000))
	}
	if !bytes.Equal(h.Bytes(), v) {
		t.Fatal("a held handle's bytes changed after Delete")
	}
	h.Release()
	h.Release() // idempotent
}

func testSoftPin(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(30)
	v := Value(k, 100_000)
	mustPut(t, tr, k, v)
	if err := tr.Pin(k, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	info, _ := tr.Stat(k)
	if info.PinnedUntil.IsZero() {
		t.Fatal("Stat does not show the pin")
	}
	fill := func(base int) {
		for i := 0; i < 3*Capacity/100_000; i++ {
			kk := Key(base + i)
			mustPut(t, tr, kk, Value(kk, 100_000))
		}
	}
	fill(3000)
	CheckGet(t, tr, k, v)
	if err := tr.Pin(k, time.Time{}); err != nil {
		t.Fatal(err)
	}
	fill(4000)
	if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("unpinned block survived 3x capacity of writes: %v", err)
	}
	// A pin that lapses by itself.
	k2 := Key(31)
	mustPut(t, tr, k2, Value(k2, 100_000))
	if err := tr.Pin(k2, time.Now().Add(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	fill(5000)
	if _, err := tr.Get(t.Context(), k2); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("block whose pin lapsed survived 3x capacity of writes: %v", err)
	}
}

func testRange(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	want := map[block.Key]int{}
	for i := range 20 {
		k := Key(40 + i)
		want[k] = 1000 + i
		mustPut(t, tr, k, Value(k, 1000+i))
	}
	got := map[block.Key]int{}
	tr.Range(func(k block.Key, info tier.BlockInfo) bool {
		got[k] = int(info.Size)
		return true
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Range saw %d blocks, want %d", len(got), len(want))
	}
	n := 0
	tr.Range(func(block.Key, tier.BlockInfo) bool { n++; return n < 5 })
	if n != 5 {
		t.Fatalf("Range did not stop when fn returned false: %d calls", n)
	}
}

func testStats(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	k := Key(50)
	mustPut(t, tr, k, Value(k, 4096))
	CheckGet(t, tr, k, Value(k, 4096))
	tr.Get(t.Context(), Key(51))
	st := tr.Stats()
	if st.Name == "" || st.Capacity <= 0 || st.Used < 4096 || st.Blocks != 1 || st.Puts != 1 || st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("Stats = %+v", st)
	}
	tr.Delete(k)
	if st := tr.Stats(); st.Blocks != 0 || st.Deletes != 1 {
		t.Fatalf("Stats after Delete = %+v", st)
	}
}

// testEvictHandler checks, for tiers that report evictions, that each victim
// reaches the handler once with its bytes, and that a handler holding the
// pin delays reuse of the space until it releases.
func testEvictHandler(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	n, ok := tr.(tier.EvictNotifier)
	if !ok {
		t.Skip("tier does not report evictions")
	}
	var mu sync.Mutex
	seen := map[block.Key]int{}
	n.SetEvictHandler(func(_ context.Context, k block.Key, info tier.BlockInfo, h *tier.Handle) {
		mu.Lock()
		defer mu.Unlock()
		seen[k]++
		if h != nil {
			if !bytes.Equal(h.Bytes(), Value(k, int(info.Size))) {
				t.Errorf("evicted %v: handler got wrong bytes", k)
			}
			h.Release()
		}
	})
	for i := 0; i < 3*Capacity/100_000; i++ {
		k := Key(6000 + i)
		mustPut(t, tr, k, Value(k, 100_000))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("handler saw no evictions")
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("%v reached the handler %d times", k, c)
		}
		if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
			t.Fatalf("evicted %v still readable after the handler returned: %v", k, err)
		}
	}
	if st := tr.Stats(); st.Evictions != int64(len(seen)) {
		t.Fatalf("Evictions %d, handler saw %d", st.Evictions, len(seen))
	}
}

// testConcurrent runs puts, gets, deletes and pins from several goroutines;
// every read must return exactly what was written for that key, and the
// capacity bound must hold throughout.
func testConcurrent(t *testing.T, newTier Factory) {
	tr := newTier(t, Capacity)
	ops := 2000
	if testing.Short() {
		ops = 500
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 42))
			for i := 0; i < ops && !t.Failed(); i++ {
				k := Key(10_000 + r.IntN(200))
				size := 1 + r.IntN(200_000)
				// A key's value is a function of the key and its size only
				// when written with that size; record size in the value.
				switch op := r.IntN(10); {
				case op < 4:
					err := tr.Put(t.Context(), k, Value(k, size), tier.PutOptions{})
					if err != nil && !errors.Is(err, tier.ErrExists) && !errors.Is(err, tier.ErrNoSpace) {
						t.Errorf("Put: %v", err)
					}
				case op < 8:
					h, err := tr.Get(t.Context(), k)
					if err != nil {
						if !errors.Is(err, tier.ErrNotFound) {
							t.Errorf("Get: %v", err)
						}
						continue
					}
					if !bytes.Equal(h.Bytes(), Value(k, h.Len())) || h.Checksum() != block.Checksum(h.Bytes()) {
						t.Errorf("Get %v: wrong bytes", k)
					}
					h.Release()
				case op < 9:
					if err := tr.Delete(k); err != nil && !errors.Is(err, tier.ErrNotFound) {
						t.Errorf("Delete: %v", err)
					}
				default:
					err := tr.Pin(k, time.Now().Add(time.Duration(r.IntN(20))*time.Millisecond))
					if err != nil && !errors.Is(err, tier.ErrNotFound) && !errors.Is(err, tier.ErrNoSpace) {
						t.Errorf("Pin: %v", err)
					}
				}
				if st := tr.Stats(); st.Used > st.Capacity {
					t.Errorf("used %d > capacity %d", st.Used, st.Capacity)
				}
			}
		})
	}
	wg.Wait()
}
