package block

import (
	"hash/crc32"

	"golang.org/x/sys/cpu"
)

// avx512CLMUL reports whether the CPU and OS support the AVX-512 carry-less
// multiply path of castagnoliAVX512.
var avx512CLMUL = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41

//go:noescape
func castagnoliAVX512(crc uint32, p []byte) uint32

// avx512Min is where the AVX-512 path starts to pay: below it the SSE4.2
// code in hash/crc32 is as fast, without setting up wide registers.
const avx512Min = 512

func updateChecksum(crc uint32, p []byte) uint32 {
	if avx512CLMUL && len(p) >= avx512Min {
		n := len(p) &^ 15
		crc = ^castagnoliAVX512(^crc, p[:n])
		p = p[n:]
	}
	if len(p) == 0 {
		return crc
	}
	return crc32.Update(crc, castagnoli, p)
}
