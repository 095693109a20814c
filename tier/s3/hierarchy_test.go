package s3_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/s3"
	"github.com/yuebing/yuebing/tier/s3/s3test"
	"github.com/yuebing/yuebing/tier/ssd"
	"github.com/yuebing/yuebing/tier/tiertest"
)

func hierarchy(t *testing.T, o s3.Options) (*tier.Hierarchy, *s3.Tier) {
	t.Helper()
	d, err := dram.New(dram.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	st := open(t, o)
	h, err := tier.NewHierarchy([]tier.Tier{d, st}, tier.HierarchyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, st
}

func checkHGet(t *testing.T, h *tier.Hierarchy, i, size, wantLevel int) {
	t.Helper()
	k := tiertest.Key(i)
	hd, level, err := h.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get %d: %v", i, err)
	}
	defer hd.Release()
	if level != wantLevel || !bytes.Equal(hd.Bytes(), tiertest.Value(k, size)) {
		t.Fatalf("Get %d: level %d (want %d), %d bytes", i, level, wantLevel, hd.Len())
	}
}

// A hierarchy of DRAM over S3: evictions go down to the bucket, a read
// finds them there, a failing bucket turns reads of what only it holds into
// misses (never errors) while DRAM keeps serving, and a second node sharing
// the namespace reads what the first demoted.
func TestHierarchyOverS3(t *testing.T) {
	srv := s3test.Start(t)
	px := s3test.NewProxy(t, srv)
	o := opts(srv, 64<<20)
	o.Endpoint = px.Endpoint
	o.RequestTimeout = 2 * time.Second // the race detector slows requests
	h, st := hierarchy(t, o)
	const n, size = 40, 100_000 // 4 MB through 1 MB of DRAM
	for i := range n {
		k := tiertest.Key(i)
		if _, err := h.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.Stats().Blocks < n-10 {
		if time.Now().After(deadline) {
			t.Fatalf("S3 holds %d blocks after %d puts through 1 MB of DRAM", st.Stats().Blocks, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := st.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkHGet(t, h, 0, size, 1)

	// A second node with the same bucket and namespace and its own DRAM.
	h2, _ := hierarchy(t, o)
	checkHGet(t, h2, 1, size, 1)

	// The bucket fails: what DRAM holds is served, the rest is a miss.
	px.Set(s3test.Fail5xx)
	if _, _, err := h.Get(t.Context(), tiertest.Key(2)); !errors.Is(err, tier.ErrNotFound) && err != nil {
		t.Fatalf("Get of an S3-only block while the bucket fails = %v, want a miss", err)
	}
	waitDegraded(t, st)
	if _, _, err := h.Get(t.Context(), tiertest.Key(3)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("Get of an S3-only block while degraded = %v, want a miss", err)
	}
	checkHGet(t, h, n-1, size, 0)
	px.Set(s3test.Pass)
	waitHealthy(t, st)
	checkHGet(t, h, 3, size, 1)
}

// TestDemotionIntoS3UnderLoad: DRAM over SSD over S3, written far past
// DRAM and SSD from several goroutines. The demotion workers' SSD puts
// evict SSD segments, whose blocks' demotions to S3 go to the queue of the
// next boundary: every put must still return (a worker that waited for
// room in one shared queue stopped every demotion, and then every put that
// evicted from DRAM), and the SSD's evictions reach S3 with no more puts
// (they were once dropped while DRAM's demotions kept the queue full).
func TestDemotionIntoS3UnderLoad(t *testing.T) {
	srv := s3test.Start(t)
	// DRAM holds more than the demotion queue's 1024 entries of 4 KiB, so
	// the queue can fill; the SSD's 1 MiB segments are evicted whole.
	d, err := dram.New(dram.Options{Capacity: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	sd, err := ssd.Open(ssd.Options{Dir: t.TempDir(), Capacity: 4 << 20, OfferEvicted: true})
	if err != nil {
		t.Fatal(err)
	}
	st := open(t, opts(srv, 1<<30))
	h, err := tier.NewHierarchy([]tier.Tier{d, sd, st}, tier.HierarchyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	const workers, perWorker, size = 4, 3000, 4 << 10 // 48 MB through 20 MB of DRAM and SSD
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				k := tiertest.Key(w*perWorker + i)
				if _, err := h.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{}); err != nil {
					errs <- fmt.Errorf("put %d: %w", w*perWorker+i, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("puts still blocked after 2 minutes: ssd %+v, s3 %+v", sd.Stats(), st.Stats())
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.Stats().Puts == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("none of the SSD's evictions reached S3: ssd %+v, s3 %+v", sd.Stats(), st.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
