// Package kvdata generates bytes that look like KV-cache blocks, for
// benchmarks and tests of compression and transfer: bf16 tensors drawn from
// a normal distribution (what attention keys and values roughly are) and
// zero-heavy blocks (padding, sparse caches).
package kvdata

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// BF16 returns n bytes of bf16 values from a normal distribution with the
// given standard deviation, little-endian: the upper half of float32.
func BF16(seed uint64, n int, stddev float64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x6b76))
	b := make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		f := float32(r.NormFloat64() * stddev)
		binary.LittleEndian.PutUint16(b[i:], uint16(math.Float32bits(f)>>16))
	}
	return b
}

// ZeroHeavy returns n bytes in which a fraction zeroFrac of 4 KiB pages is
// zero and the rest bf16 data, as in blocks padded to a fixed length.
func ZeroHeavy(seed uint64, n int, zeroFrac float64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x7a72))
	b := BF16(seed, n, 1)
	const page = 4096
	for off := 0; off < n; off += page {
		if r.Float64() < zeroFrac {
			clear(b[off:min(off+page, n)])
		}
	}
	return b
}
