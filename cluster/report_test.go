package cluster

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestDecodeReportRejects(t *testing.T) {
	good := appendReport(nil, &report{Node: 1, Term: 2, Records: []Record{{Key: testKey(1), Tiers: 1}}, Hits: []Hit{{Key: testKey(2), Count: 3}}})
	f := func(name string, mutate func([]byte) []byte) {
		t.Helper()
		b := mutate(bytes.Clone(good))
		if _, err := decodeReport(b); !errors.Is(err, ErrBadReport) {
			t.Errorf("%s: err %v, want ErrBadReport", name, err)
		}
	}
	f("empty", func([]byte) []byte { return nil })
	f("short", func(b []byte) []byte { return b[:reportHeaderSize] })
	f("magic", func(b []byte) []byte { b[0] = 'X'; return b })
	f("checksum", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })
	f("truncated", func(b []byte) []byte { return b[:len(b)-5] })
	f("extra byte", func(b []byte) []byte { return append(b, 0) })
	// Fields that decode only with a valid checksum, so re-encode.
	bad := func(name string, r *report, patch func([]byte)) {
		t.Helper()
		b := appendReport(nil, r)
		b = b[:len(b)-trailerSize]
		patch(b)
		b = appendChecksum(b)
		if _, err := decodeReport(b); !errors.Is(err, ErrBadReport) {
			t.Errorf("%s: err %v, want ErrBadReport", name, err)
		}
	}
	bad("unknown flag", &report{}, func(b []byte) { b[4] = 0x80 })
	bad("reserved header", &report{}, func(b []byte) { b[6] = 1 })
	bad("too many records", &report{}, func(b []byte) { b[12], b[13], b[14] = 0, 0, 2 })
	bad("record count off", &report{Records: []Record{{}}}, func(b []byte) { b[12] = 2 })
	bad("reserved record", &report{Records: []Record{{}}}, func(b []byte) { b[reportHeaderSize+34] = 1 })
}

func FuzzDecodeReport(f *testing.F) {
	f.Add(appendReport(nil, &report{}))
	f.Add(appendReport(nil, &report{Flags: flagFullBegin | flagFullEnd, Node: 7, Term: 9, Capacity: 1 << 30, Free: 5, Load: 0.5,
		Records: []Record{{Key: testKey(1), Tiers: 3, Desired: 2, PinnedUntil: 77, Size: 4096}},
		Hits:    []Hit{{Key: testKey(2), Count: 1}}}))
	f.Add([]byte("YBR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeReport(b)
		if err != nil {
			if !errors.Is(err, ErrBadReport) {
				t.Fatalf("error %v does not wrap ErrBadReport", err)
			}
			return
		}
		// What decodes encodes back to the same bytes.
		again := appendReport(nil, r)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
		r2, err := decodeReport(again)
		if err != nil || !slices.Equal(r2.Records, r.Records) || !slices.Equal(r2.Hits, r.Hits) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
