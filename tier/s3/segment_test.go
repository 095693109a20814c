package s3

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

func sampleFooter() *footer {
	var k1, k2 block.Key
	k1[0], k2[31] = 1, 2
	return &footer{
		Entries: []footerEntry{
			{Key: k1, Off: 0, Len: 10, CRC: 0xdeadbeef, PinnedUntil: 1_700_000_000_000_000_000, Meta: []byte("meta")},
			{Key: k2, Off: 10, Len: 0, CRC: 0},
		},
		Tombs: []tombstone{{Seg: "ns/seg/0000000000000001-abcd", Key: k1}},
	}
}

func decodeObject(obj []byte) (*footer, error) {
	if len(obj) < trailerSize {
		return nil, ErrFormat
	}
	n, crc, version, err := parseTrailer(obj[len(obj)-trailerSize:], int64(len(obj)))
	if err != nil {
		return nil, err
	}
	dataLen := int64(len(obj)) - trailerSize - n
	return decodeFooter(obj[dataLen:len(obj)-trailerSize], crc, dataLen, version)
}

func TestFooterRoundTrip(t *testing.T) {
	f := sampleFooter()
	obj := appendFooter(make([]byte, 10), f)
	got, err := decodeObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Fatalf("got %+v, want %+v", got, f)
	}
	empty, err := decodeObject(appendFooter(nil, &footer{}))
	if err != nil || len(empty.Entries) != 0 || len(empty.Tombs) != 0 {
		t.Fatalf("empty footer: %+v, %v", empty, err)
	}
}

// TestFooterClasses: a footer that records a class is written as version
// 2 and reads back with its classes and class records; one without any
// stays version 1, byte for byte what a node that predates classes wrote
// and reads.
func TestFooterClasses(t *testing.T) {
	f := sampleFooter()
	if obj := appendFooter(make([]byte, 10), f); binary.LittleEndian.Uint32(obj[len(obj)-4:]) != formatVersion {
		v := binary.LittleEndian.Uint32(obj[len(obj)-4:])
		t.Fatalf("footer without classes written as version %d", v)
	}
	f.Entries[0].Retention, f.Entries[0].RetainUntil = tier.RetentionPinned, 1_800_000_000_000_000_000
	f.Entries[1].Retention = tier.RetentionLow
	f.Tombs = append(f.Tombs, tombstone{Seg: "ns/seg/0000000000000002-abcd", Key: f.Entries[1].Key, Class: true, Retention: tier.RetentionHigh, RetainUntil: 5})
	obj := appendFooter(make([]byte, 10), f)
	if v := binary.LittleEndian.Uint32(obj[len(obj)-4:]); v != formatClasses {
		t.Fatalf("footer with classes written as version %d", v)
	}
	got, err := decodeObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Fatalf("got %+v, want %+v", got, f)
	}
	// An unknown class is a malformed footer, not a block kept forever.
	f.Entries[0].Retention = 9
	if _, err := decodeObject(appendFooter(make([]byte, 10), f)); !errors.Is(err, ErrFormat) {
		t.Fatalf("unknown class: %v", err)
	}
}

func TestFooterRejectsDamage(t *testing.T) {
	obj := appendFooter(make([]byte, 10), sampleFooter())
	for i := 10; i < len(obj); i++ {
		bad := append([]byte(nil), obj...)
		bad[i] ^= 0x40
		if _, err := decodeObject(bad); !errors.Is(err, ErrFormat) {
			t.Fatalf("flipping byte %d: %v", i, err)
		}
	}
	// An entry that points past the data is refused even with a valid CRC.
	f := sampleFooter()
	f.Entries[0].Len = 11
	if _, err := decodeObject(appendFooter(make([]byte, 10), f)); !errors.Is(err, ErrFormat) {
		t.Fatalf("entry outside the data: %v", err)
	}
}

func FuzzDecodeFooter(f *testing.F) {
	f.Add(appendFooter(make([]byte, 10), sampleFooter()))
	f.Add(appendFooter(nil, &footer{}))
	f.Add([]byte("YBS3SEG1"))
	f.Fuzz(func(t *testing.T, obj []byte) {
		fo, err := decodeObject(obj)
		if err != nil {
			return
		}
		dataLen, end := int64(len(obj)), int64(0)
		for _, e := range fo.Entries {
			if e.Off < 0 || e.Len < 0 || e.Off+e.Len > dataLen {
				t.Fatalf("entry %+v outside %d bytes", e, dataLen)
			}
			end = max(end, e.Off+e.Len)
		}
		// What decodes re-encodes to a footer that decodes the same.
		again, err := decodeObject(appendFooter(make([]byte, end), fo))
		if err != nil || len(again.Entries) != len(fo.Entries) || len(again.Tombs) != len(fo.Tombs) {
			t.Fatalf("re-encoding: %+v, %v", again, err)
		}
	})
}

// FuzzDecodeFooterBody feeds footers with a matching checksum, so the
// fuzzer reaches the parser behind the CRC check.
func FuzzDecodeFooterBody(f *testing.F) {
	obj := appendFooter(make([]byte, 10), sampleFooter())
	f.Add(obj[10:len(obj)-trailerSize], int64(10))
	f.Add([]byte{0, 0}, int64(0))
	f.Add(obj[10:len(obj)-trailerSize], int64(10))
	f.Fuzz(func(t *testing.T, p []byte, dataLen int64) {
		if dataLen < 0 {
			return
		}
		// Both versions read the same bytes: the parser of either must
		// refuse what it cannot read, never panic.
		if fo, err := decodeFooter(p, block.Checksum(p), dataLen, formatClasses); err == nil {
			for _, e := range fo.Entries {
				if !e.Retention.Valid() || e.RetainUntil < 0 {
					t.Fatalf("entry %+v with a class no tier knows", e)
				}
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("error %v is not ErrFormat", err)
		}
		fo, err := decodeFooter(p, block.Checksum(p), dataLen, formatVersion)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		for _, e := range fo.Entries {
			if e.Off < 0 || e.Len < 0 || e.Off+e.Len > dataLen || len(e.Meta) > 512 {
				t.Fatalf("entry %+v outside %d bytes", e, dataLen)
			}
		}
	})
}
