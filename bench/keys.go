package bench

import (
	"cmp"
	"encoding/binary"
	"math/rand/v2"
	"slices"

	"github.com/yuebing/yuebing/block"
)

func RandomBytes(seed uint64, n int64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

func Key(n uint64) block.Key {
	var k block.Key
	binary.LittleEndian.PutUint64(k[:], n)
	binary.LittleEndian.PutUint64(k[8:], n*0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint64(k[16:], ^n)
	k[31] = 1
	return k
}

// TopBlocks returns the dense ids of the n highest scores, highest first
// (ties by id); fewer if there are fewer blocks.
func TopBlocks(score []int64, n int) []int32 {
	order := make([]int32, len(score))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(score[b], score[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order[:min(n, len(order))]
}

// IDKey is the block key of a dense id; KeyID inverts it.
func IDKey(id int32) block.Key { return Key(uint64(id)) }

func KeyID(k block.Key) int32 { return int32(binary.LittleEndian.Uint64(k[:8])) }
