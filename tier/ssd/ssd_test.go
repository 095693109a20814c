package ssd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

func openTest(t *testing.T, opts Options) *SSD {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	// The durable path runs once; the compressed variants skip fsync,
	// which they do not change, to keep the suite fast.
	for _, comp := range []string{"none", "s2", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			tiertest.RunSuite(t, func(t *testing.T, capacity int64) tier.Tier {
				return openTest(t, Options{Dir: t.TempDir(), Capacity: capacity, Compression: comp, SegmentSize: 256 << 10, NoSync: comp != "none"})
			})
		})
	}
}

func TestReopenKeepsBlocks(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := map[block.Key][]byte{}
	for i := range 50 {
		k := tiertest.Key(i)
		want[k] = tiertest.Value(k, 1000*i)
		if err := s.Put(t.Context(), k, want[k], tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		k := tiertest.Key(i)
		s.Delete(k)
		delete(want, k)
	}
	pinned := tiertest.Key(20)
	until := time.Now().Add(time.Hour).Truncate(time.Nanosecond)
	if err := s.Pin(pinned, until); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Dir: dir, Capacity: 64 << 20})
	n := 0
	s.Range(func(k block.Key, info tier.BlockInfo) bool {
		n++
		if _, ok := want[k]; !ok {
			t.Errorf("deleted or unknown block %v came back", k)
		}
		return true
	})
	if n != len(want) {
		t.Fatalf("reopened tier lists %d blocks, want %d", n, len(want))
	}
	for k, v := range want {
		tiertest.CheckGet(t, s, k, v)
	}
	if info, _ := s.Stat(pinned); !info.PinnedUntil.Equal(until) {
		t.Fatalf("pin after reopen: %v, want %v", info.PinnedUntil, until)
	}
}

// TestCorruptBlockIsDropped flips a byte of a stored payload: the read fails
// with ErrCorrupt, the block is gone afterwards, and the count says so.
func TestCorruptBlockIsDropped(t *testing.T) {
	for _, comp := range []string{"none", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			s := openTest(t, Options{Dir: t.TempDir(), Capacity: 16 << 20, Compression: comp})
			k, other := tiertest.Key(1), tiertest.Key(2)
			v := bytes.Repeat([]byte("kv tensors "), 10_000)
			s.Put(t.Context(), k, v, tier.PutOptions{})
			s.Put(t.Context(), other, tiertest.Value(other, 5000), tier.PutOptions{})
			s.mu.Lock()
			e := s.mu.blocks[k]
			path, off := e.seg.path, e.off+recHeaderSize+int64(e.hdr.StoredLen)/2
			s.mu.Unlock()
			flipByte(t, path, off)
			if _, err := s.Get(t.Context(), k); !errors.Is(err, tier.ErrCorrupt) {
				t.Fatalf("Get of a corrupt block = %v, want ErrCorrupt", err)
			}
			if _, err := s.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
				t.Fatalf("second Get = %v, want ErrNotFound", err)
			}
			if st := s.Stats(); st.Corrupt != 1 {
				t.Fatalf("Corrupt = %d", st.Corrupt)
			}
			tiertest.CheckGet(t, s, other, tiertest.Value(other, 5000))
		})
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	f.ReadAt(b[:], off)
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// TestTornTailIsCut appends half a record, as a crash mid-write leaves it:
// reopening cuts the file back to the last whole record and keeps the rest.
func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Capacity: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var keys []block.Key
	for i := range 5 {
		k := tiertest.Key(i)
		keys = append(keys, k)
		s.Put(t.Context(), k, tiertest.Value(k, 10_000), tier.PutOptions{})
	}
	s.mu.Lock()
	path := s.mu.active.path
	s.mu.Unlock()
	s.Close()

	st, _ := os.Stat(path)
	whole := st.Size()
	var hb [recHeaderSize]byte
	junk := tiertest.Value(tiertest.Key(99), 10_000)
	encodeRecHeader(hb[:], tiertest.Key(99), block.Header{RawLen: 10_000, StoredLen: 10_000, Checksum: block.Checksum(junk)}, nil)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(hb[:])
	f.Write(junk[:4000]) // torn: the header promises 10000 bytes
	f.Close()

	s = openTest(t, Options{Dir: dir, Capacity: 16 << 20})
	if st, _ := os.Stat(path); st.Size() != whole {
		t.Fatalf("segment is %d bytes after recovery, want %d", st.Size(), whole)
	}
	for _, k := range keys {
		tiertest.CheckGet(t, s, k, tiertest.Value(k, 10_000))
	}
	if _, err := s.Get(t.Context(), tiertest.Key(99)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("torn record was indexed: %v", err)
	}
}

// TestLostIndexTailIsRescanned removes index entries as a crash between the
// segment flush and the index write would, and checks the reopened tier
// finds the blocks by scanning the segment.
func TestLostIndexTailIsRescanned(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Capacity: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var keys []block.Key
	for i := range 10 {
		k := tiertest.Key(i)
		keys = append(keys, k)
		s.Put(t.Context(), k, tiertest.Value(k, 3000), tier.PutOptions{Meta: []byte{byte(i), 'm'}})
	}
	// Forget the last three entries and rewind the marker before them.
	s.mu.Lock()
	e := s.mu.blocks[keys[7]]
	segID, rewind := e.seg.id, e.off
	s.mu.Unlock()
	for _, k := range keys[7:] {
		s.idx.db.Delete(blockIndexKey(k), nil)
	}
	var m [8]byte
	putUint64(m[:], uint64(rewind))
	s.idx.db.Set(markerKey(segID), m[:], nil)
	s.Close()

	s = openTest(t, Options{Dir: dir, Capacity: 16 << 20})
	for i, k := range keys {
		tiertest.CheckGet(t, s, k, tiertest.Value(k, 3000))
		if info, _ := s.Stat(k); string(info.Meta) != string([]byte{byte(i), 'm'}) {
			t.Fatalf("block %d: metadata %q after a rescan", i, info.Meta)
		}
	}
}

func TestPinnedBlockSurvivesSegmentEviction(t *testing.T) {
	s := openTest(t, Options{Dir: t.TempDir(), Capacity: 4 << 20, SegmentSize: 512 << 10})
	k := tiertest.Key(1)
	v := tiertest.Value(k, 100_000)
	s.Put(t.Context(), k, v, tier.PutOptions{PinnedUntil: time.Now().Add(time.Hour)})
	for i := range 200 {
		kk := tiertest.Key(1000 + i)
		if err := s.Put(t.Context(), kk, tiertest.Value(kk, 100_000), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tiertest.CheckGet(t, s, k, v)
	if st := s.Stats(); st.Used > st.Capacity || st.Pinned != 100_000 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSegmentFilesMatchUsed(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Options{Dir: dir, Capacity: 4 << 20, SegmentSize: 256 << 10})
	for i := range 300 {
		k := tiertest.Key(i)
		s.Put(t.Context(), k, tiertest.Value(k, 30_000), tier.PutOptions{})
		if i%7 == 0 {
			s.Delete(tiertest.Key(i / 2))
		}
	}
	var onDisk int64
	ents, _ := os.ReadDir(filepath.Join(dir, "segments"))
	var names []string
	for _, e := range ents {
		info, _ := e.Info()
		onDisk += info.Size()
		names = append(names, e.Name())
	}
	sort.Strings(names)
	st := s.Stats()
	if onDisk != st.Used || st.Used > st.Capacity {
		t.Fatalf("segment files hold %d bytes, tier reports %d used of %d (%s)", onDisk, st.Used, st.Capacity, strings.Join(names, " "))
	}
}

func TestOptionsValidate(t *testing.T) {
	_, err := Open(Options{Capacity: 10, Compression: "lz4"})
	for _, want := range []string{"Dir", "Capacity", "Compression"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func TestConformancePebbleValues(t *testing.T) {
	tiertest.RunSuite(t, func(t *testing.T, capacity int64) tier.Tier {
		p, err := OpenPebble(Options{Dir: t.TempDir(), Capacity: capacity})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	})
}

func TestPebbleValuesReopen(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(Options{Dir: dir, Capacity: 16 << 20, Compression: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		k := tiertest.Key(i)
		p.Put(t.Context(), k, tiertest.Value(k, 2000*i), tier.PutOptions{})
	}
	p.Close()
	p, err = OpenPebble(Options{Dir: dir, Capacity: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 20 {
		k := tiertest.Key(i)
		tiertest.CheckGet(t, p, k, tiertest.Value(k, 2000*i))
	}
}

func TestReadBuffersAreNotSharedBetweenLiveHandles(t *testing.T) {
	s := openTest(t, Options{Dir: t.TempDir(), Capacity: 16 << 20})
	a, b := tiertest.Key(1), tiertest.Key(2)
	s.Put(t.Context(), a, tiertest.Value(a, 100_000), tier.PutOptions{})
	s.Put(t.Context(), b, tiertest.Value(b, 100_000), tier.PutOptions{})
	ha, _ := s.Get(t.Context(), a)
	hc := ha.Clone()
	ha.Release()
	for range 5 { // reuse pooled buffers while the clone still holds a's
		hb, _ := s.Get(t.Context(), b)
		hb.Release()
	}
	if !bytes.Equal(hc.Bytes(), tiertest.Value(a, 100_000)) {
		t.Fatal("a clone's bytes were reused by another read")
	}
	hc.Release()
}

// TestRescanSkipsHoleBelowIndexedRecords: a put whose write failed leaves
// a hole in its segment, while a later record of the same segment was
// written, flushed, acknowledged and indexed. A rescan that meets the hole
// must not cut the file there and lose the acknowledged records after it;
// a hole past every indexed record is a torn tail and is cut.
func TestRescanSkipsHoleBelowIndexedRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Capacity: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var keys []block.Key
	for i := range 8 {
		k := tiertest.Key(i)
		keys = append(keys, k)
		if err := s.Put(t.Context(), k, tiertest.Value(k, 3000), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	hole := s.mu.blocks[keys[3]]
	segID, path := hole.seg.id, hole.seg.path
	s.mu.Unlock()
	// The failed write: record 3 never reached the file, and its put was
	// not acknowledged, so it is not indexed. The rewound marker makes
	// the rescan start before it, as after a crash that lost the marker.
	s.idx.db.Delete(blockIndexKey(keys[3]), nil)
	var m [8]byte
	s.idx.db.Set(markerKey(segID), m[:], nil)
	s.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, hole.recLen), hole.off); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s = openTest(t, Options{Dir: dir, Capacity: 16 << 20})
	for i, k := range keys {
		if i == 3 {
			if _, err := s.Stat(k); !errors.Is(err, tier.ErrNotFound) {
				t.Fatalf("the hole's block is listed: %v", err)
			}
			continue
		}
		tiertest.CheckGet(t, s, k, tiertest.Value(k, 3000))
	}
}
