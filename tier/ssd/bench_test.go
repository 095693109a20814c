package ssd

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/kvdata"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// Each tier benchmark has a baseline sub-benchmark moving the same bytes
// through a plain file in the same run: appending with write+fdatasync for
// durable puts, pread of bytes dropped from the page cache for cold reads.

var benchSizes = []int{64 << 10, 1 << 20, 16 << 20}

func BenchmarkPutDurable(b *testing.B) {
	for _, size := range benchSizes {
		src := tiertest.Value(tiertest.Key(1), size)
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), Capacity: 4 << 30, MaxBlockSize: int64(size)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if err := s.Put(b.Context(), tiertest.Key(i), src, tier.PutOptions{}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("size=%d/layout=pebble", size), func(b *testing.B) {
			p, err := OpenPebble(Options{Dir: b.TempDir(), Capacity: 4 << 30, MaxBlockSize: int64(size)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if err := p.Put(b.Context(), tiertest.Key(i), src, tier.PutOptions{}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("size=%d/baseline=write+fdatasync", size), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(size))
			off := int64(0)
			for b.Loop() {
				if _, err := f.WriteAt(src, off); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
				off += int64(size)
			}
		})
	}
}

func BenchmarkGetCold(b *testing.B) {
	for _, size := range benchSizes {
		n := max(64<<20/size, 8)
		v := tiertest.Value(tiertest.Key(2), size)
		order := rand.New(rand.NewPCG(1, 2)).Perm(n)
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), Capacity: int64(2*n*size + 64<<20), MaxBlockSize: int64(size)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := range n {
				s.Put(b.Context(), tiertest.Key(i), v, tier.PutOptions{})
			}
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				h, err := s.Get(b.Context(), tiertest.Key(order[i%n]))
				if err != nil {
					b.Fatal(err)
				}
				h.Release()
				i++
			}
		})
		b.Run(fmt.Sprintf("size=%d/layout=pebble", size), func(b *testing.B) {
			dir := b.TempDir()
			p, err := OpenPebble(Options{Dir: dir, Capacity: int64(2*n*size + 64<<20), MaxBlockSize: int64(size)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			for i := range n {
				p.Put(b.Context(), tiertest.Key(i), v, tier.PutOptions{})
			}
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				// pebble reads through the page cache and cannot be told
				// to drop it; drop its files' pages outside the timing.
				b.StopTimer()
				dropDir(b, dir)
				b.StartTimer()
				h, err := p.Get(b.Context(), tiertest.Key(order[i%n]))
				if err != nil {
					b.Fatal(err)
				}
				h.Release()
				i++
			}
		})
		b.Run(fmt.Sprintf("size=%d/baseline=pread", size), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			for i := range n {
				f.WriteAt(v, int64(i*size))
			}
			f.Sync()
			unix.Fadvise(int(f.Fd()), 0, int64(n*size), unix.FADV_DONTNEED)
			unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM) // as the tier: no read-ahead
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				off := int64(order[i%n] * size)
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				unix.Fadvise(int(f.Fd()), off, int64(size), unix.FADV_DONTNEED)
				i++
			}
		})
	}
}

// dropDir drops every file under dir from the page cache.
func dropDir(b *testing.B, dir string) {
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return nil // pebble removed it meanwhile
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCodec reports compression speed and ratio on KV-like data: bf16
// tensors and blocks whose pages are 60% zero (padding).
func BenchmarkCodec(b *testing.B) {
	const size = 4 << 20
	data := map[string][]byte{
		"bf16":       kvdata.BF16(1, size, 1),
		"zero-heavy": kvdata.ZeroHeavy(2, size, 0.6),
	}
	zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	zdec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	defer zdec.Close()
	for _, kind := range []string{"bf16", "zero-heavy"} {
		src := data[kind]
		codecs := []struct {
			name       string
			comp       func([]byte) []byte
			decomp     func([]byte) ([]byte, error)
			compressed []byte
		}{
			{name: "s2", comp: func(p []byte) []byte { return s2.Encode(nil, p) }, decomp: func(p []byte) ([]byte, error) { return s2.Decode(nil, p) }},
			{name: "zstd", comp: func(p []byte) []byte { return zenc.EncodeAll(p, nil) }, decomp: func(p []byte) ([]byte, error) { return zdec.DecodeAll(p, nil) }},
		}
		for _, c := range codecs {
			comp := c.comp(src)
			b.Run(fmt.Sprintf("%s/%s/compress", kind, c.name), func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					c.comp(src)
				}
				b.ReportMetric(float64(size)/float64(len(comp)), "ratio")
			})
			b.Run(fmt.Sprintf("%s/%s/decompress", kind, c.name), func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if _, err := c.decomp(comp); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(kind+"/baseline=crc32c", func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				block.Checksum(src)
			}
		})
	}
}
