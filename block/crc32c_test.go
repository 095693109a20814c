package block

import (
	"fmt"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
)

var stdCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// TestChecksumMatchesStdlib compares Checksum and UpdateChecksum with
// hash/crc32 over lengths around every boundary of the fast path (16-byte
// tails, 64- and 256-byte loops, the 512-byte threshold), at every alignment,
// with random initial values.
func TestChecksumMatchesStdlib(t *testing.T) {
	t.Logf("AVX-512 CLMUL path available: %v", avx512CLMUL)
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20+300)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	lengths := []int{0, 1, 15, 16, 17, 63, 64, 255, 256, 257, 511, 512, 513, 527, 528, 767, 768, 769, 1023, 1024, 1025, 4095, 4096, 4097, 65536 + 7, 1 << 20}
	for n := 0; n < 3000; n += 1 + r.IntN(13) {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, off := range []int{0, 1, 7, 8, 31, 64 + 3} {
			p := buf[off : off+n]
			init := r.Uint32()
			if got, want := UpdateChecksum(init, p), crc32.Update(init, stdCastagnoli, p); got != want {
				t.Fatalf("len %d off %d init %08x: %08x, want %08x", n, off, init, got, want)
			}
			if got, want := Checksum(p), crc32.Checksum(p, stdCastagnoli); got != want {
				t.Fatalf("Checksum len %d off %d: %08x, want %08x", n, off, got, want)
			}
		}
	}
	// Incremental updates in odd pieces agree with one pass.
	var c uint32
	for p := buf[:1<<20]; len(p) > 0; {
		k := min(len(p), 1+r.IntN(5000))
		c = UpdateChecksum(c, p[:k])
		p = p[k:]
	}
	if c != crc32.Checksum(buf[:1<<20], stdCastagnoli) {
		t.Fatal("incremental checksum differs")
	}
}

func FuzzChecksum(f *testing.F) {
	f.Add(uint32(0), make([]byte, 600))
	f.Add(uint32(0xffffffff), []byte("123456789"))
	f.Fuzz(func(t *testing.T, init uint32, p []byte) {
		if got, want := UpdateChecksum(init, p), crc32.Update(init, stdCastagnoli, p); got != want {
			t.Fatalf("len %d: %08x, want %08x", len(p), got, want)
		}
	})
}

// TestCastagnoliConstants recomputes the folding and reduction constants in
// crc32c_amd64.s from the polynomial, so they are derived, not trusted.
func TestCastagnoliConstants(t *testing.T) {
	const poly = 0x11EDC6F41 // x^32 + Castagnoli's 0x1EDC6F41
	xnmod := func(n int) uint64 {
		r := uint64(1)
		for range n {
			r <<= 1
			if r&(1<<32) != 0 {
				r ^= poly
			}
		}
		return r
	}
	refl33 := func(r uint64) uint64 { return uint64(bits.Reverse32(uint32(r))) << 1 }
	// mu = floor(x^64 / P), by long division.
	var mu uint64
	rem := [2]uint64{0, 1}
	for i := 64; i >= 32; i-- {
		if rem[i/64]>>(i%64)&1 == 1 {
			mu |= 1 << (i - 32)
			for j := 0; j <= 32; j++ {
				if poly>>j&1 == 1 {
					rem[(i-32+j)/64] ^= 1 << ((i - 32 + j) % 64)
				}
			}
		}
	}
	reflect33 := func(v uint64) uint64 { return bits.Reverse64(v) >> 31 }
	want := map[string][]uint64{
		"k2048": {refl33(xnmod(2048 + 32)), refl33(xnmod(2048 - 32))},
		"k512":  {refl33(xnmod(512 + 32)), refl33(xnmod(512 - 32))},
		"k128":  {refl33(xnmod(128 + 32)), refl33(xnmod(128 - 32))},
		"kpoly": {reflect33(poly), reflect33(mu)},
		"kr5":   {refl33(xnmod(64))},
	}
	src, err := os.ReadFile("crc32c_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`DATA (\w+)<>\+(\d+)\(SB\)/8, \$0x([0-9a-f]+)`)
	seen := 0
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		off, _ := strconv.Atoi(m[2])
		v, _ := strconv.ParseUint(m[3], 16, 64)
		w, ok := want[m[1]]
		if !ok {
			t.Fatalf("unexpected constant %s", m[1])
		}
		if exp := w[off/8%len(w)]; v != exp {
			t.Errorf("%s+%d = %#x, want %#x", m[1], off, v, exp)
		}
		seen++
	}
	if seen != 8+8+2+2+1 {
		t.Fatalf("checked %d constants, want 21", seen)
	}
}

var sinkSum uint32

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{4 << 10, 64 << 10, 1 << 20, 16 << 20} {
		p := make([]byte, n)
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sinkSum = Checksum(p)
			}
		})
		b.Run(fmt.Sprintf("size=%d/baseline=hash-crc32", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sinkSum = crc32.Checksum(p, stdCastagnoli)
			}
		})
	}
}
