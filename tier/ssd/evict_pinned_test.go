package ssd

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/tiertest"
)

// gateFS holds the next segment creation (an exclusive open) until
// released, so a test can stop a put in the middle of creating a segment.
type gateFS struct {
	OSFS
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&os.O_EXCL != 0 && g.hold.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.OSFS.OpenFile(name, flag, perm)
}

// waitingInEviction reports whether some goroutine is blocked waiting for
// space while it evicts a segment.
func waitingInEviction() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "(*SSD).waitLocked") && strings.Contains(g, "(*SSD).evictSegmentLocked") {
			return true
		}
	}
	return false
}

// TestEvictionKeepsPinnedBlocksWhenThePutGivesUp: the put whose need for
// room evicts a segment may be cancelled (its client went away) while the
// segment's soft-pinned blocks are copied forward; the pinned blocks belong
// to others and must be kept all the same.
func TestEvictionKeepsPinnedBlocksWhenThePutGivesUp(t *testing.T) {
	g := &gateFS{entered: make(chan struct{}), release: make(chan struct{})}
	// 100 KiB blocks: two per 256 KiB segment, whose rest stays empty, so
	// the tier has more room than the active segment.
	s := openTest(t, Options{Dir: t.TempDir(), Capacity: 1 << 20, SegmentSize: 256 << 10, NoSync: true, Files: g})
	const size = 100 << 10
	var pinned []block.Key
	for i := range 8 {
		k := tiertest.Key(i)
		opts := tier.PutOptions{}
		if i < 2 {
			opts.PinnedUntil = time.Now().Add(time.Hour) // the oldest segment's blocks
			pinned = append(pinned, k)
		}
		if err := s.Put(t.Context(), k, tiertest.Value(k, size), opts); err != nil {
			t.Fatal(err)
		}
	}
	// A put that fits the tier but not the active segment creates a
	// segment, and is held there.
	g.hold.Store(true)
	aDone := make(chan error, 1)
	go func() {
		aDone <- s.Put(t.Context(), tiertest.Key(100), tiertest.Value(tiertest.Key(100), size), tier.PutOptions{})
	}()
	<-g.entered
	// A put that needs more room than is left, from a caller already gone:
	// it evicts the oldest segment, whose pinned blocks are copied forward
	// into a segment that is still being created.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	bDone := make(chan error, 1)
	go func() {
		bDone <- s.Put(gone, tiertest.Key(101), tiertest.Value(tiertest.Key(101), 250<<10), tier.PutOptions{})
	}()
	for !waitingInEviction() {
		select {
		case <-bDone:
			bDone = nil // it did not wait
		default:
		}
		if bDone == nil {
			break
		}
		runtime.Gosched()
	}
	close(g.release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if bDone != nil {
		<-bDone // its own outcome does not matter: its caller is gone
	}
	for _, k := range pinned {
		h, err := s.Get(t.Context(), k)
		if err != nil {
			t.Errorf("pinned block %s after the eviction: %v", k, err)
			continue
		}
		if string(h.Bytes()) != string(tiertest.Value(k, size)) {
			t.Errorf("pinned block %s: wrong bytes", k)
		}
		h.Release()
	}
}
