//go:build !amd64

package block

import "hash/crc32"

const avx512CLMUL = false

func updateChecksum(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }
