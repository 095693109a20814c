package cluster

import (
	"bytes"
	"testing"
)

func TestDecodeFrame(t *testing.T) {
	var b [frameHeaderSize]byte
	good := frame{Status: frameFound, Size: 100, Checksum: 7, MetaLen: 3, PinnedUntil: 1700000000}
	good.encode(&b)
	f, err := decodeFrame(b[:], 1000)
	if err != nil || f != good {
		t.Fatalf("round trip: %+v, %v", f, err)
	}
	notHeld := frame{Status: frameNotHeld}
	notHeld.encode(&b)
	if f, err := decodeFrame(b[:], 1000); err != nil || f != notHeld {
		t.Fatalf("not held: %+v, %v", f, err)
	}
	bad := []struct {
		name string
		edit func(b *[frameHeaderSize]byte)
	}{
		{"magic", func(b *[frameHeaderSize]byte) { b[0] = 'X' }},
		{"status", func(b *[frameHeaderSize]byte) { b[4] = 9 }},
		{"reserved", func(b *[frameHeaderSize]byte) { b[6] = 1 }},
		{"too large", func(b *[frameHeaderSize]byte) { b[15] = 1 }},
		{"meta too large", func(b *[frameHeaderSize]byte) { b[23] = 1 }},
		{"negative pin", func(b *[frameHeaderSize]byte) { b[31] = 0x80 }},
		{"not held with a size", func(b *[frameHeaderSize]byte) { b[4] = frameNotHeld }},
	}
	for _, c := range bad {
		good.encode(&b)
		c.edit(&b)
		if _, err := decodeFrame(b[:], 1000); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if _, err := decodeFrame(b[:10], 1000); err == nil {
		t.Error("short header accepted")
	}
}

func FuzzDecodeFrame(f *testing.F) {
	var b [frameHeaderSize]byte
	(&frame{Status: frameFound, Size: 100, Checksum: 7, MetaLen: 3}).encode(&b)
	f.Add(b[:])
	(&frame{Status: frameNotHeld}).encode(&b)
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := decodeFrame(in, 1<<20)
		if err != nil {
			return
		}
		var out [frameHeaderSize]byte
		fr.encode(&out)
		if !bytes.Equal(out[:], in) {
			t.Fatalf("re-encoded %x, decoded from %x", out, in)
		}
	})
}
