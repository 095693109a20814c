package ssd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
	"github.com/yuebing/yuebing/tier/ssd/ssdtest"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// logBuf collects a tier's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func faultyOptions(dir string, d *ssdtest.Disk, log *logBuf) ssd.Options {
	return ssd.Options{
		Dir: dir, Capacity: 32 << 20, SegmentSize: 1 << 20,
		Files: d.Files(), IndexFS: d.Index(),
		// Probe often: the tests wait for recovery, they do not time it.
		ProbeInterval: time.Millisecond, MaxProbeInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// waitHealth waits until the tier's Health satisfies ok; the deadline is
// generous because it guards against a hang, not a slow machine.
func waitHealth(t *testing.T, s tier.HealthReporter, what string, ok func(tier.Health) bool) tier.Health {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h := s.Health()
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("tier never became %s: %+v", what, h)
		}
		time.Sleep(time.Millisecond)
	}
}

func healthy(h tier.Health) bool { return !h.Degraded }

// checkAll reads every acknowledged block back and compares its bytes.
func checkAll(t *testing.T, s tier.Tier, acked map[block.Key]int) {
	t.Helper()
	for k, size := range acked {
		tiertest.CheckGet(t, s, k, tiertest.Value(k, size))
	}
}

// checkReopen opens the directory again over a healthy disk: every
// acknowledged block is listed and reads back right, and every listed
// block reads back right (a block whose put failed may come back, since
// its bytes verify, but never wrong).
func checkReopen(t *testing.T, dir string, acked map[block.Key]int, deleted map[block.Key]bool) {
	t.Helper()
	s, err := ssd.Open(ssd.Options{Dir: dir, Capacity: 32 << 20, SegmentSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	listed := map[block.Key]tier.BlockInfo{}
	s.Range(func(k block.Key, info tier.BlockInfo) bool { listed[k] = info; return true })
	for k, size := range acked {
		if _, ok := listed[k]; !ok {
			t.Errorf("acknowledged block %v (%d bytes) is gone after reopening", k, size)
		}
	}
	for k := range deleted {
		if _, ok := listed[k]; ok {
			t.Errorf("block %v deleted while the index was failing came back", k)
		}
	}
	for k, info := range listed {
		h, err := s.Get(t.Context(), k)
		if err != nil {
			t.Errorf("listed block %v does not read: %v", k, err)
			continue
		}
		if !bytes.Equal(h.Bytes(), tiertest.Value(k, int(info.Size))) {
			t.Errorf("listed block %v reads back wrong bytes", k)
		}
		h.Release()
	}
}

// TestFaults drives each kind of device fault through the tier: the
// operation that meets it fails with ErrUnavailable and the system's
// error, the tier degrades and says why once, refuses puts without
// touching the device, keeps serving what it acknowledged, recovers by
// itself when the fault clears, and loses nothing it acknowledged.
func TestFaults(t *testing.T) {
	const stored = 20
	big := 3 << 19 // larger than a segment: needs a file of its own
	cases := []struct {
		name  string
		fault ssdtest.Fault
		// trigger meets the fault; n numbers a fresh key.
		trigger   func(t *testing.T, s *ssd.SSD, n int) error
		cause     string
		op        string
		wantErr   error
		readsFail bool // reads fail while the fault lasts
		// sealed: the segment the fault hit takes no more records; puts
		// after recovery go to a new file.
		sealed bool
	}{
		{
			name:  "write EIO",
			fault: ssdtest.Fault{Op: ssdtest.OpWrite},
			cause: "write", op: "write", wantErr: syscall.EIO, sealed: true,
		},
		{
			name:  "write ENOSPC after a partial write",
			fault: ssdtest.Fault{Op: ssdtest.OpWrite, Err: syscall.ENOSPC, Torn: true},
			cause: "no_space", op: "write", wantErr: syscall.ENOSPC, sealed: true,
		},
		{
			name:  "fdatasync EIO",
			fault: ssdtest.Fault{Op: ssdtest.OpSync},
			cause: "sync", op: "sync", wantErr: syscall.EIO, sealed: true,
		},
		{
			name:  "segment creation EIO",
			fault: ssdtest.Fault{Op: ssdtest.OpCreate},
			trigger: func(t *testing.T, s *ssd.SSD, n int) error {
				k := tiertest.Key(n)
				return s.Put(t.Context(), k, tiertest.Value(k, big), tier.PutOptions{})
			},
			cause: "create", op: "create", wantErr: syscall.EIO,
		},
		{
			name:  "read EIO",
			fault: ssdtest.Fault{Op: ssdtest.OpRead},
			trigger: func(t *testing.T, s *ssd.SSD, _ int) error {
				h, err := s.Get(t.Context(), tiertest.Key(3))
				if err == nil {
					h.Release()
				}
				return err
			},
			cause: "read", op: "read", wantErr: syscall.EIO, readsFail: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			disk := ssdtest.NewDisk(uint64(len(tc.name)))
			var log logBuf
			s, err := ssd.Open(faultyOptions(dir, disk, &log))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			acked := map[block.Key]int{}
			put := func(n, size int) error {
				k := tiertest.Key(n)
				err := s.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{})
				if err == nil {
					acked[k] = size
				}
				return err
			}
			for i := range stored {
				if err := put(i, 1000*(i+1)); err != nil {
					t.Fatal(err)
				}
			}

			disk.Inject(tc.fault)
			trigger := tc.trigger
			if trigger == nil {
				trigger = func(t *testing.T, s *ssd.SSD, n int) error { return put(n, 5000) }
			}
			err = trigger(t, s, 1000)
			if !errors.Is(err, tier.ErrUnavailable) || !errors.Is(err, tc.wantErr) {
				t.Fatalf("operation under the fault: got %v, want an error wrapping ErrUnavailable and %v", err, tc.wantErr)
			}
			if errors.Is(err, tier.ErrCorrupt) {
				t.Fatalf("a device error is not corruption: %v", err)
			}
			if _, err := s.Stat(tiertest.Key(1000)); !errors.Is(err, tier.ErrNotFound) {
				t.Fatalf("the failed put left an entry: %v", err)
			}
			h := s.Health()
			if !h.Degraded || h.Cause != tc.cause || h.Reason == "" || h.IOErrors[tc.op] == 0 {
				t.Fatalf("health after the fault: %+v, want degraded by %s", h, tc.cause)
			}

			// Degraded: puts are refused before they reach the device.
			// The tier's own probe of the device (a file of its own) may
			// run meanwhile; the segments must see nothing.
			fired := disk.FiredMatching(tc.fault.Op, "*.seg")
			for i := range 5 {
				if err := put(2000+i, 3000); !errors.Is(err, tier.ErrUnavailable) {
					t.Fatalf("put while degraded: %v, want ErrUnavailable", err)
				}
			}
			if tc.fault.Op != ssdtest.OpRead && disk.FiredMatching(tc.fault.Op, "*.seg") != fired {
				t.Fatalf("puts while degraded reached the device")
			}
			if tc.readsFail {
				// The block is kept: the device may read it again.
				if _, err := s.Stat(tiertest.Key(3)); err != nil {
					t.Fatalf("a block that failed to read was dropped: %v", err)
				}
				if st := s.Stats(); st.Corrupt != 0 {
					t.Fatalf("a read error counted as corruption: %+v", st)
				}
			} else {
				checkAll(t, s, acked) // what was acknowledged still reads
			}

			disk.Clear()
			h = waitHealth(t, s, "healthy", healthy)
			if h.Recoveries != 1 {
				t.Fatalf("recoveries = %d, want 1", h.Recoveries)
			}
			for i := range 5 {
				if err := put(3000+i, 4000+i); err != nil {
					t.Fatalf("put after recovery: %v", err)
				}
			}
			if tc.sealed {
				// Version is segment<<40 | offset (tier/ssd entry.info).
				before, _ := s.Stat(tiertest.Key(stored - 1))
				after, _ := s.Stat(tiertest.Key(3000))
				if after.Version>>40 <= before.Version>>40 {
					t.Fatalf("a put after recovery went to segment %d, the failed one was %d", after.Version>>40, before.Version>>40)
				}
			}
			checkAll(t, s, acked)
			if n := log.count("tier degraded"); n != 1 {
				t.Fatalf("the log says the tier degraded %d times, want once:\n%s", n, log.String())
			}
			if n := log.count("tier recovered"); n != 1 {
				t.Fatalf("the log says the tier recovered %d times, want once:\n%s", n, log.String())
			}
			if err := s.Close(); err != nil {
				t.Fatalf("closing after recovery: %v", err)
			}
			checkReopen(t, dir, acked, nil)
		})
	}
}

// TestFaultBitFlip: a device that returns wrong bytes is caught by the
// checksum; the block is dropped, never served.
func TestFaultBitFlip(t *testing.T) {
	disk := ssdtest.NewDisk(7)
	var log logBuf
	s, err := ssd.Open(faultyOptions(t.TempDir(), disk, &log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := tiertest.Key(1)
	if err := s.Put(t.Context(), k, tiertest.Value(k, 64<<10), tier.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	disk.Inject(ssdtest.Fault{Op: ssdtest.OpRead, Flip: true, Count: 1})
	h, err := s.Get(t.Context(), k)
	if err == nil {
		h.Release()
		t.Fatal("a block read with a flipped byte was served")
	}
	if !errors.Is(err, tier.ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if _, err := s.Stat(k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("the corrupt block is still listed: %v", err)
	}
}

// TestFaultIndex fails the pebble index's writes. Puts stay durable (the
// segment files describe themselves), the tier degrades once pebble
// reports the failure, deletes made meanwhile live in memory, and the
// probe reopens pebble and rewrites the index, so a reopened tier lists
// exactly what was acknowledged and not deleted.
func TestFaultIndex(t *testing.T) {
	dir := t.TempDir()
	disk := ssdtest.NewDisk(3)
	var log logBuf
	s, err := ssd.Open(faultyOptions(dir, disk, &log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acked := map[block.Key]int{}
	for i := range 10 {
		k := tiertest.Key(i)
		if err := s.Put(t.Context(), k, tiertest.Value(k, 2000), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		acked[k] = 2000
	}
	disk.Inject(ssdtest.Fault{Op: ssdtest.OpWrite, Index: true})
	// Pebble writes its WAL behind the commit: the failure shows on a
	// later put, which is still durable in its segment.
	// Its writes go out in 32 KiB blocks, so the bound is generous.
	n := 100
	for ; n < 5000 && !s.Health().Degraded; n++ {
		k := tiertest.Key(n)
		err := s.Put(t.Context(), k, tiertest.Value(k, 64), tier.PutOptions{})
		if err == nil {
			acked[k] = 64
		} else if !errors.Is(err, tier.ErrUnavailable) {
			t.Fatalf("put %d: %v", n, err)
		}
	}
	h := s.Health()
	if !h.Degraded || h.Cause != "index" {
		t.Fatalf("health with a failing index: %+v", h)
	}
	deleted := map[block.Key]bool{}
	for _, i := range []int{2, 5} {
		k := tiertest.Key(i)
		if err := s.Delete(k); err != nil {
			t.Fatal(err)
		}
		delete(acked, k)
		deleted[k] = true
	}
	checkAll(t, s, acked)

	disk.Clear()
	waitHealth(t, s, "healthy", healthy)
	k := tiertest.Key(9000)
	if err := s.Put(t.Context(), k, tiertest.Value(k, 2000), tier.PutOptions{}); err != nil {
		t.Fatalf("put after the index recovered: %v", err)
	}
	acked[k] = 2000
	if n := log.count("tier degraded"); n != 1 {
		t.Fatalf("the log says the tier degraded %d times, want once:\n%s", n, log.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkReopen(t, dir, acked, deleted)
}

// TestFaultTornWrite cuts a put's write at a random offset and crashes the
// disk there: nothing reaches it afterwards, as if the process had died
// mid-write. Reopened over a healthy disk, the tier keeps every block
// acknowledged before the crash and never serves the torn one wrong.
func TestFaultTornWrite(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			dir := t.TempDir()
			disk := ssdtest.NewDisk(uint64(seed))
			var log logBuf
			s, err := ssd.Open(faultyOptions(dir, disk, &log))
			if err != nil {
				t.Fatal(err)
			}
			acked := map[block.Key]int{}
			// Four writers share segments, so the torn record may lie
			// between acknowledged ones.
			var mu sync.Mutex
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(t.Context())
			for g := range 4 {
				wg.Go(func() {
					for i := 0; ctx.Err() == nil; i++ {
						k := tiertest.Key(g*100_000 + i)
						size := 1 + (i*7919+g*104729)%(48<<10)
						if err := s.Put(ctx, k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
							return
						}
						mu.Lock()
						acked[k] = size
						mu.Unlock()
					}
				})
			}
			// Let some puts land first, then tear one.
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= 40+seed*10 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			disk.Inject(ssdtest.Fault{Op: ssdtest.OpWrite, Torn: true, Crash: true})
			waitHealth(t, s, "degraded", func(h tier.Health) bool { return h.Degraded })
			cancel()
			wg.Wait()
			if !disk.Crashed() {
				t.Fatal("the torn write never happened")
			}
			s.Close() // on a dead disk: errors expected
			checkReopen(t, dir, acked, nil)
		})
	}
}

// TestFaultThroughHierarchy: with the SSD tier failing its writes, a
// DRAM + SSD hierarchy keeps taking puts (into DRAM; what it evicts is
// dropped instead of demoted, quietly), serves every block it still holds
// with the right bytes, says once why the SSD degraded, and demotes again
// once the device recovers.
func TestFaultThroughHierarchy(t *testing.T) {
	disk := ssdtest.NewDisk(11)
	var log logBuf
	opts := faultyOptions(t.TempDir(), disk, &log)
	s, err := ssd.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dram.New(dram.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{Logger: opts.Logger})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	const size = 64 << 10
	put := func(n int) {
		t.Helper()
		k := tiertest.Key(n)
		if _, err := h.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
			t.Fatalf("put %d: %v", n, err)
		}
	}
	// get reads a block if the hierarchy still holds it; a block dropped
	// for want of a tier is a miss, never wrong bytes.
	get := func(n int) bool {
		t.Helper()
		k := tiertest.Key(n)
		hd, _, err := h.Get(t.Context(), k)
		if errors.Is(err, tier.ErrNotFound) {
			return false
		}
		if err != nil {
			t.Fatalf("get %d: %v", n, err)
		}
		defer hd.Release()
		if !bytes.Equal(hd.Bytes(), tiertest.Value(k, size)) {
			t.Fatalf("block %d reads back wrong bytes", n)
		}
		return true
	}
	for i := range 10 {
		put(i)
	}
	if _, err := h.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	ssdPuts := s.Stats().Puts

	disk.Inject(ssdtest.Fault{Op: ssdtest.OpWrite})
	for i := 100; i < 160; i++ { // 60 blocks through a 16-block DRAM tier
		put(i)
	}
	waitHealth(t, s, "degraded", func(h tier.Health) bool { return h.Degraded })
	for i := range 10 {
		if !get(i) {
			t.Fatalf("block %d, stored on SSD before the fault, is gone", i)
		}
	}
	held := 0
	for i := 100; i < 160; i++ {
		if get(i) {
			held++
		}
	}
	if held == 0 {
		t.Fatal("no block put during the fault is held")
	}
	if n := log.count("tier degraded"); n != 1 {
		t.Fatalf("the log says the tier degraded %d times, want once:\n%s", n, log.String())
	}
	if n := log.count("demotion failed"); n != 0 {
		t.Fatalf("the hierarchy logged %d failed demotions of a degraded tier", n)
	}

	disk.Clear()
	waitHealth(t, s, "healthy", healthy)
	for i := 200; i < 240; i++ {
		put(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Stats().Puts == ssdPuts {
		if time.Now().After(deadline) {
			t.Fatal("no block was demoted to the recovered SSD tier")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFaultPebbleValues: the values-in-pebble layout fails a put whose
// pebble write fails with ErrUnavailable, keeps serving what it stored, and
// neither hangs nor crashes, though pebble's commit pipeline is gone.
func TestFaultPebbleValues(t *testing.T) {
	disk := ssdtest.NewDisk(13)
	var log logBuf
	opts := faultyOptions(t.TempDir(), disk, &log)
	p, err := ssd.OpenPebble(opts)
	if err != nil {
		t.Fatal(err)
	}
	acked := map[block.Key]int{}
	for i := range 10 {
		k := tiertest.Key(i)
		if err := p.Put(t.Context(), k, tiertest.Value(k, 3000), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		acked[k] = 3000
	}
	disk.Inject(ssdtest.Fault{Op: ssdtest.OpSync, Index: true})
	failed := 0
	for i := 100; i < 110; i++ {
		k := tiertest.Key(i)
		err := p.Put(t.Context(), k, tiertest.Value(k, 3000), tier.PutOptions{})
		if err == nil {
			acked[k] = 3000
			continue
		}
		if !errors.Is(err, tier.ErrUnavailable) {
			t.Fatalf("put %d with a failing disk: %v, want ErrUnavailable", i, err)
		}
		failed++
	}
	if failed == 0 {
		t.Fatal("no put failed while every pebble sync did")
	}
	checkAll(t, p, acked)
	p.Close()
}

// TestFaultUnreadableBlock: a sector that never reads again (the probe's
// own file reads fine) costs the one block on it, after the probe has
// retried it for a while, and the tier then recovers instead of staying
// degraded for good.
func TestFaultUnreadableBlock(t *testing.T) {
	disk := ssdtest.NewDisk(17)
	var log logBuf
	s, err := ssd.Open(faultyOptions(t.TempDir(), disk, &log))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		k := tiertest.Key(i)
		if err := s.Put(t.Context(), k, tiertest.Value(k, 5000), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	disk.Inject(ssdtest.Fault{Op: ssdtest.OpRead, Match: "*.seg"})
	if _, err := s.Get(t.Context(), tiertest.Key(1)); !errors.Is(err, tier.ErrUnavailable) {
		t.Fatalf("read of a bad sector: %v, want ErrUnavailable", err)
	}
	h := waitHealth(t, s, "healthy", healthy)
	if _, err := s.Stat(tiertest.Key(1)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("the unreadable block is still listed: %v", err)
	}
	if st := s.Stats(); st.Corrupt != 1 || st.Blocks != 2 {
		t.Fatalf("stats after dropping the unreadable block: %+v", st)
	}
	if h.Recoveries != 1 || log.count("dropping a block its device cannot read") != 1 {
		t.Fatalf("health %+v, log:\n%s", h, log.String())
	}
}
