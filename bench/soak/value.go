package soak

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"

	"github.com/yuebing/yuebing/block"
)

// Kinds of soak values: which front end wrote them.
const (
	kindBlock   = 1 // HTTP PUT /v1/blocks/{key}
	kindObject  = 2 // HTTP PUT /v1/objects/{name}
	kindRESP    = 3 // RESP SET
	kindBatch   = 4 // HTTP POST /v1/batch/put
	kindDurable = 5 // HTTP block put too large for DRAM: acknowledged from SSD
)

var kindNames = map[byte]string{kindBlock: "block", kindObject: "object", kindRESP: "resp", kindBatch: "batch", kindDurable: "durable"}

// A soak value describes itself, so a read can tell the right bytes from
// any others without remembering what was written:
//
//	0  4  magic "YBSK"
//	4  1  kind
//	5  3  zero
//	8  8  slot, little-endian
//	16 8  version
//	24 4  total length of the value
//	28 4  CRC-32C of bytes 0..27 and 32..: the header checks itself too
//	32 .. payload, a window of a fixed pseudo-random pattern chosen by
//	      (kind, slot, version)
const soakHeaderSize = 32

var soakMagic = [4]byte{'Y', 'B', 'S', 'K'}

var soakCRC = crc32.MakeTable(crc32.Castagnoli)

// soakPattern is the random bytes payloads are cut from: generating a
// value costs a copy, not a random number per byte.
var soakPattern = sync.OnceValue(func() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 2<<20)
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
})

func soakSeed(kind byte, slot, version uint64) uint64 {
	x := uint64(kind)<<56 ^ slot*0x9e3779b97f4a7c15 ^ version*0xbf58476d1ce4e5b9
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	return x ^ x>>29
}

// soakSize is the length of a value: chosen by (kind, slot, version) in
// [lo, hi], so a reader knows it too.
func soakSize(kind byte, slot, version uint64, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + int(soakSeed(kind, slot, version^0x55)%uint64(hi-lo+1))
}

// fillSoakValue writes the value of (kind, slot, version) into b (its
// whole length).
func fillSoakValue(b []byte, kind byte, slot, version uint64) {
	copy(b[0:4], soakMagic[:])
	b[4], b[5], b[6], b[7] = kind, 0, 0, 0
	binary.LittleEndian.PutUint64(b[8:], slot)
	binary.LittleEndian.PutUint64(b[16:], version)
	binary.LittleEndian.PutUint32(b[24:], uint32(len(b)))
	pat := soakPattern()
	off := int(soakSeed(kind, slot, version) % uint64(len(pat)))
	for p := b[soakHeaderSize:]; len(p) > 0; off = 0 {
		p = p[copy(p, pat[off:]):]
	}
	binary.LittleEndian.PutUint32(b[28:], soakChecksum(b))
}

func soakChecksum(b []byte) uint32 {
	return crc32.Update(crc32.Checksum(b[:28], soakCRC), soakCRC, b[soakHeaderSize:])
}

// soakValue is what a read returned, decoded.
type soakValue struct {
	kind          byte
	slot, version uint64
}

var errNotSoak = errors.New("not a soak value")

// parseSoakValue checks a value read back: header, length and payload
// checksum. It does not know what was asked for; the caller compares.
func parseSoakValue(b []byte) (soakValue, error) {
	var v soakValue
	if len(b) < soakHeaderSize || [4]byte(b[0:4]) != soakMagic {
		return v, fmt.Errorf("%w: %d bytes, no header", errNotSoak, len(b))
	}
	v.kind = b[4]
	v.slot = binary.LittleEndian.Uint64(b[8:])
	v.version = binary.LittleEndian.Uint64(b[16:])
	if n := binary.LittleEndian.Uint32(b[24:]); int(n) != len(b) {
		return v, fmt.Errorf("%w: %d bytes, header says %d", errNotSoak, len(b), n)
	}
	if got, want := soakChecksum(b), binary.LittleEndian.Uint32(b[28:]); got != want {
		return v, fmt.Errorf("%w: crc32c %08x, header says %08x", errNotSoak, got, want)
	}
	return v, nil
}

// soakKey is the block key of version of slot of kind: every write of
// the HTTP front ends goes to a key of its own, since a block, once
// stored, is never rewritten.
func soakKey(kind byte, slot, version uint64) block.Key {
	var b [17]byte
	b[0] = kind
	binary.LittleEndian.PutUint64(b[1:], slot)
	binary.LittleEndian.PutUint64(b[9:], version)
	return block.Key(sha256.Sum256(b[:]))
}

// soakObjectName is the object name of version of slot.
func soakObjectName(slot, version uint64) string {
	return fmt.Sprintf("soak/%d/v%d", slot, version)
}

// soakRESPKey is the RESP key of slot: rewritten in place by every SET,
// which is what the RESP check is about.
func soakRESPKey(slot uint64) string { return fmt.Sprintf("soak:%d", slot) }
