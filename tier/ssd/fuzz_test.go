package ssd

import (
	"bytes"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// The decoders of what the tier reads back from disk: they see whatever a
// torn write, a bad sector or another program left there, so they must
// reject garbage with an error and never panic.

// FuzzRecordHeader decodes segment record headers. A header that decodes
// re-encodes to the same bytes (its checksum covers all of it but the
// checksum itself), and its lengths are the header's.
func FuzzRecordHeader(f *testing.F) {
	k := tiertest.Key(1)
	for _, meta := range [][]byte{nil, []byte("name"), bytes.Repeat([]byte{7}, 512)} {
		var b [recHeaderSize]byte
		encodeRecHeader(b[:], k, block.Header{Codec: block.CodecS2, RawLen: 4096, StoredLen: 1000, Checksum: 0xdeadbeef}, meta)
		f.Add(b[:])
	}
	f.Add(make([]byte, recHeaderSize))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rh, err := decodeRecHeader(b)
		if err != nil {
			return
		}
		if rh.recLen() != recHeaderSize+int64(rh.hdr.StoredLen)+int64(rh.metaLen) || rh.metaLen > 0xffff {
			t.Fatalf("record length %d does not add up: %+v", rh.recLen(), rh)
		}
		var again [recHeaderSize]byte
		copy(again[:], b)
		if _, err := decodeRecHeader(again[:]); err != nil {
			t.Fatalf("a header that decoded does not decode again: %v", err)
		}
	})
}

// FuzzLocation decodes index entries: an accepted one re-encodes to the
// same bytes and its record length covers its header, payload and metadata.
func FuzzLocation(f *testing.F) {
	for _, l := range []location{
		{seg: 3, off: 4096, recLen: recHeaderSize + 100, hdr: block.Header{RawLen: 100, StoredLen: 100, Checksum: 1}},
		{seg: 1, off: 0, recLen: recHeaderSize + 10 + 4, hdr: block.Header{Codec: block.CodecZstd, RawLen: 50, StoredLen: 10}, pinnedUntil: 1e18, meta: []byte("meta")},
	} {
		f.Add(l.encode())
	}
	f.Add(make([]byte, locationSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLocation(b)
		if err != nil {
			return
		}
		if l.off < 0 || l.recLen != recHeaderSize+int64(l.hdr.StoredLen)+int64(len(l.meta)) {
			t.Fatalf("accepted an inconsistent location: %+v", l)
		}
		if !bytes.Equal(l.encode(), b) {
			t.Fatalf("location does not re-encode to its bytes")
		}
	})
}

// FuzzPebbleValue decodes values of the values-in-pebble layout through the
// same path a read takes: an accepted value's payload matches its header's
// checksum, whatever the codec claims.
func FuzzPebbleValue(f *testing.F) {
	c, err := newCodec(block.CodecZstd, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(c.close)
	p := &PebbleStore{codec: c}
	value := func(raw, meta []byte, kind block.Codec) []byte {
		cc := &codec{kind: kind, zenc: c.zenc, zdec: c.zdec}
		stored, k := cc.compress(raw)
		hdr := block.Header{Codec: k, RawLen: uint32(len(raw)), StoredLen: uint32(len(stored)), Checksum: block.Checksum(raw)}
		v := make([]byte, block.HeaderSize+2+len(meta)+len(stored))
		hdr.Encode(v)
		v[block.HeaderSize], v[block.HeaderSize+1] = byte(len(meta)), byte(len(meta)>>8)
		copy(v[block.HeaderSize+2:], meta)
		copy(v[block.HeaderSize+2+len(meta):], stored)
		return v
	}
	zeros := make([]byte, 8192)
	f.Add(value([]byte("hello, blocks"), nil, block.CodecNone))
	f.Add(value(zeros, []byte("m"), block.CodecS2))
	f.Add(value(zeros, nil, block.CodecZstd))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		hdr, meta, stored, err := splitValue(v)
		if err == nil && len(v) != block.HeaderSize+2+len(meta)+len(stored) {
			t.Fatalf("split does not cover the value: %+v", hdr)
		}
		raw, err := p.decode(v)
		if err != nil {
			return
		}
		if len(raw) != int(hdr.RawLen) || block.Checksum(raw) != hdr.Checksum {
			t.Fatalf("decode accepted a payload that does not match its header")
		}
	})
}
