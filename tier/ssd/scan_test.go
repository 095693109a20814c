package ssd

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// TestScanRecords: a scan of a closed tier's files lists exactly the blocks
// it holds, compressed or not, with their sizes and checksums, and stops a
// file at a torn tail.
func TestScanRecords(t *testing.T) {
	for _, comp := range []string{"none", "s2"} {
		t.Run(comp, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(Options{Dir: dir, Capacity: 64 << 20, SegmentSize: 256 << 10, Compression: comp, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			want := map[block.Key][]byte{}
			for i := range 40 {
				k := tiertest.Key(i)
				v := tiertest.Value(k, 3000*i+1)
				if i%2 == 0 {
					v = bytes.Repeat([]byte{byte(i)}, 20_000) // compresses
				}
				want[k] = v
				if err := s.Put(t.Context(), k, v, tier.PutOptions{Meta: []byte("m")}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			scan := func() map[block.Key]RecordInfo {
				t.Helper()
				got := map[block.Key]RecordInfo{}
				err := ScanRecords(dir, func(r RecordInfo) error {
					if _, dup := got[r.Key]; dup {
						t.Errorf("key %s listed twice", r.Key)
					}
					got[r.Key] = r
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			got := scan()
			if len(got) != len(want) {
				t.Fatalf("scan found %d records, want %d", len(got), len(want))
			}
			var last RecordInfo
			for k, v := range want {
				r, ok := got[k]
				if !ok || r.Size != int64(len(v)) || r.Checksum != block.Checksum(v) {
					t.Errorf("key %s: %+v, want size %d checksum %08x", k, r, len(v), block.Checksum(v))
				}
				if r.Segment > last.Segment || (r.Segment == last.Segment && r.Offset > last.Offset) {
					last = r
				}
			}
			// Flip a byte of the last record's payload: it no longer
			// verifies, so the scan stops there and lists the rest.
			path := filepath.Join(dir, "segments", last.Segment)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			b := []byte{0}
			f.ReadAt(b, last.Offset+recHeaderSize+1)
			b[0] ^= 0xff
			if _, err := f.WriteAt(b, last.Offset+recHeaderSize+1); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got = scan()
			if _, ok := got[last.Key]; ok || len(got) != len(want)-1 {
				t.Fatalf("after damaging %s: %d records, damaged one listed %v", last.Key, len(got), ok)
			}
		})
	}
}
