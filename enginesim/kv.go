package enginesim

import (
	"bytes"
	"encoding/binary"

	"github.com/yuebing/yuebing/block"
)

// Fill writes the KV of layer layer of the block keyed k: a xorshift stream
// seeded by the key and the layer. The key covers every token up to the
// block's end, so this is a function of the prompt prefix, as real KV is.
func Fill(dst []byte, k block.Key, layer int) {
	x := binary.LittleEndian.Uint64(k[:8]) ^ uint64(layer+1)*0x9e3779b97f4a7c15
	if x == 0 {
		x = 1
	}
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(dst[i:], x)
	}
	for ; i < len(dst); i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst[i] = byte(x)
	}
}

// Check reports whether got is the KV Fill writes for (k, layer); scratch
// is a buffer of the same length.
func Check(got, scratch []byte, k block.Key, layer int) bool {
	Fill(scratch, k, layer)
	return bytes.Equal(got, scratch)
}
