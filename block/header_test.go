package block

import (
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	payload := []byte("the kv tensors of sixteen tokens")
	h := Header{Codec: CodecNone, RawLen: uint32(len(payload)), StoredLen: uint32(len(payload)), Checksum: Checksum(payload)}
	var b [HeaderSize]byte
	h.Encode(b[:])
	got, err := DecodeHeader(b[:])
	if err != nil {
		t.Fatal(err)
	}
	if got != h {
		t.Fatalf("got %+v, want %+v", got, h)
	}
	if err := got.Verify(payload); err != nil {
		t.Fatal(err)
	}
	payload[3] ^= 1
	if err := got.Verify(payload); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a flipped bit = %v, want ErrCorrupt", err)
	}
	if err := got.Verify(payload[:4]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a short payload = %v, want ErrCorrupt", err)
	}
}

func TestDecodeHeaderRejects(t *testing.T) {
	good := func() []byte {
		var b [HeaderSize]byte
		Header{Codec: CodecZstd, RawLen: 100, StoredLen: 40, Checksum: 7}.Encode(b[:])
		return b[:]
	}
	mutate := map[string]func(b []byte) []byte{
		"short":       func(b []byte) []byte { return b[:HeaderSize-1] },
		"magic":       func(b []byte) []byte { b[0] = 'X'; return b },
		"flipped len": func(b []byte) []byte { b[5] ^= 1; return b },
		"header crc":  func(b []byte) []byte { b[19] ^= 1; return b },
	}
	for name, m := range mutate {
		if _, err := DecodeHeader(m(good())); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	// A header that is well formed but describes an impossible block.
	var b [HeaderSize]byte
	Header{Codec: CodecNone, RawLen: 100, StoredLen: 40}.Encode(b[:])
	if _, err := DecodeHeader(b[:]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("uncompressed with stored != raw: got %v, want ErrCorrupt", err)
	}
	Header{Codec: 9, RawLen: 1, StoredLen: 1}.Encode(b[:])
	if _, err := DecodeHeader(b[:]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unknown codec: got %v, want ErrCorrupt", err)
	}
}

func TestChecksumIsCastagnoli(t *testing.T) {
	// The standard CRC-32C check value (RFC 3720, appendix B.4).
	if got := Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("Checksum(123456789) = %08x, want e3069283", got)
	}
	if got := UpdateChecksum(Checksum([]byte("1234")), []byte("56789")); got != 0xe3069283 {
		t.Fatalf("incremental checksum = %08x", got)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	var b [HeaderSize]byte
	Header{Codec: CodecS2, RawLen: 1 << 20, StoredLen: 1000, Checksum: 42}.Encode(b[:])
	f.Add(b[:])
	f.Add([]byte("YB"))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := DecodeHeader(in)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		var out [HeaderSize]byte
		h.Encode(out[:])
		if string(out[:]) != string(in[:HeaderSize]) {
			t.Fatalf("accepted header does not re-encode to itself")
		}
	})
}

// TestVerify: a block read back passes only with its recorded length and
// checksum; anything else is ErrCorrupt, as every tier reports it.
func TestVerify(t *testing.T) {
	p := []byte("a block of KV tensors")
	sum := Checksum(p)
	f := func(payload []byte, size uint64, crc uint32, ok bool) {
		t.Helper()
		err := Verify(payload, size, crc)
		if ok != (err == nil) || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("Verify(%q, %d, %08x) = %v, want ok %v", payload, size, crc, err, ok)
		}
	}
	f(p, uint64(len(p)), sum, true)
	f(nil, 0, 0, true)
	f(p[:len(p)-1], uint64(len(p)), sum, false)
	f(p, uint64(len(p))+1, sum, false)
	f(p, uint64(len(p)), sum^1, false)
	flipped := append([]byte(nil), p...)
	flipped[3] ^= 0x40
	f(flipped, uint64(len(p)), sum, false)
}
