package ssd_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/ssd"
	"github.com/yuebing/yuebing/tier/ssd/ssdtest"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// TestRealDiskFull puts the segment files on a real, small tmpfs that a
// filler file has nearly filled, so the kernel itself answers ENOSPC (no
// simulator). The tier degrades with cause no_space, keeps serving what it
// acknowledged, and recovers by itself once the filler is removed. It
// needs permission to mount a tmpfs (root); elsewhere it skips.
func TestRealDiskFull(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 6<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	segs := filepath.Join(mnt, "segments")
	if err := os.Mkdir(segs, 0o755); err != nil {
		t.Fatal(err)
	}
	// The index stays on the roomy disk: the full device is the segments'.
	if err := os.Symlink(segs, filepath.Join(dir, "segments")); err != nil {
		t.Fatal(err)
	}
	var log logBuf
	opts := faultyOptions(dir, ssdtest.NewDisk(0), &log)
	opts.Files, opts.IndexFS = nil, nil // the real file system
	opts.SegmentSize = 256 << 10
	s, err := ssd.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const size = 100 << 10
	acked := map[block.Key]int{}
	var full error
	for i := 0; i < 64 && full == nil; i++ { // 6.4 MiB into the 2 MiB left
		k := tiertest.Key(i)
		if err := s.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
			full = err
			continue
		}
		acked[k] = size
	}
	if !errors.Is(full, syscall.ENOSPC) || !errors.Is(full, tier.ErrUnavailable) {
		t.Fatalf("filling the device: %v, want ENOSPC wrapped in ErrUnavailable", full)
	}
	if h := s.Health(); !h.Degraded || h.Cause != "no_space" {
		t.Fatalf("health on a full device: %+v", h)
	}
	if len(acked) == 0 {
		t.Fatal("nothing fitted before the device filled")
	}
	checkAll(t, s, acked)
	k := tiertest.Key(1000)
	if err := s.Put(t.Context(), k, tiertest.Value(k, 10), tier.PutOptions{}); !errors.Is(err, tier.ErrUnavailable) {
		t.Fatalf("put while the device is full: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, s, "healthy", healthy)
	if err := s.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
		t.Fatalf("put after space came back: %v", err)
	}
	acked[k] = size
	checkAll(t, s, acked)
	if n := log.count("tier degraded"); n != 1 {
		t.Fatalf("the log says the tier degraded %d times, want once:\n%s", n, log.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkReopen(t, dir, acked, nil)
}
