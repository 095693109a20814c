package s3_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/s3"
	"github.com/yuebing/yuebing/tier/s3/s3test"
	"github.com/yuebing/yuebing/tier/tiertest"
)

var nsSeq atomic.Int64

// opts returns options for srv with a fresh namespace and small segments,
// so tests cross segment boundaries and flush quickly.
func opts(srv *s3test.Server, capacity int64) s3.Options {
	return s3.Options{
		Endpoint:        srv.Endpoint,
		Bucket:          srv.Bucket,
		Namespace:       fmt.Sprintf("test/%d", nsSeq.Add(1)),
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
		Capacity:        bytesize.Size(capacity),
		SegmentSize:     256 << 10,
		FlushInterval:   50 * time.Millisecond,
		ProbeInterval:   50 * time.Millisecond,
		RequestTimeout:  2 * time.Second,
		RefreshInterval: -1,
	}
}

func open(t *testing.T, o s3.Options) *s3.Tier {
	t.Helper()
	tr, err := s3.Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	tiertest.RunSuite(t, func(t *testing.T, capacity int64) tier.Tier {
		return open(t, opts(srv, capacity))
	})
}

// objects lists the segment objects under a namespace.
func objects(t *testing.T, srv *s3test.Server, ns string) []minio.ObjectInfo {
	t.Helper()
	var out []minio.ObjectInfo
	for o := range srv.Client().ListObjects(t.Context(), srv.Bucket, minio.ListObjectsOptions{Prefix: ns + "/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out = append(out, o)
	}
	return out
}

func putN(t *testing.T, tr tier.Tier, from, n, size int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		k := tiertest.Key(i)
		if err := tr.Put(t.Context(), k, tiertest.Value(k, size), tier.PutOptions{Meta: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
}

func TestPackedIntoSegments(t *testing.T) {
	srv := s3test.Start(t)
	o := opts(srv, 64<<20)
	tr := open(t, o)
	putN(t, tr, 0, 100, 10_000) // 1 MB: about four 256 KiB segments, not 100 objects
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, srv, o.Namespace)
	if len(objs) < 3 || len(objs) > 6 {
		t.Fatalf("100 blocks of 10 kB in %d objects, want about 4", len(objs))
	}
	for i := range 100 {
		k := tiertest.Key(i)
		tiertest.CheckGet(t, tr, k, tiertest.Value(k, 10_000))
	}
}

func TestRestartKeepsIndex(t *testing.T) {
	srv := s3test.Start(t)
	o := opts(srv, 64<<20)
	tr, err := s3.Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	putN(t, tr, 0, 60, 9_000)
	pin := time.Now().Add(time.Hour).Truncate(time.Second)
	pk := tiertest.Key(500)
	if err := tr.Put(t.Context(), pk, []byte("pinned"), tier.PutOptions{PinnedUntil: pin}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // deleted after upload: tombstones must keep them gone
		tr.Delete(tiertest.Key(i))
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	tr2 := open(t, o)
	if st := tr2.Stats(); st.Blocks != 51 {
		t.Fatalf("after restart: %d blocks, want 51", st.Blocks)
	}
	for i := range 60 {
		k := tiertest.Key(i)
		if i < 10 {
			if _, err := tr2.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
				t.Fatalf("deleted block %d back after restart: %v", i, err)
			}
			continue
		}
		tiertest.CheckGet(t, tr2, k, tiertest.Value(k, 9_000))
		if info, _ := tr2.Stat(k); string(info.Meta) != fmt.Sprint("m", i) {
			t.Fatalf("meta of %d after restart = %q", i, info.Meta)
		}
	}
	if info, _ := tr2.Stat(pk); !info.PinnedUntil.Equal(pin) {
		t.Fatalf("pin after restart = %v, want %v", info.PinnedUntil, pin)
	}
}

func TestSharedNamespace(t *testing.T) {
	srv := s3test.Start(t)
	o := opts(srv, 64<<20)
	a := open(t, o)
	putN(t, a, 0, 20, 5_000)
	if err := a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := open(t, o) // a second node with the same bucket and namespace
	for i := range 20 {
		k := tiertest.Key(i)
		tiertest.CheckGet(t, b, k, tiertest.Value(k, 5_000))
	}
	putN(t, a, 20, 5, 5_000)
	if err := a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(t.Context(), tiertest.Key(22)); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("before Refresh: %v", err)
	}
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	tiertest.CheckGet(t, b, tiertest.Key(22), tiertest.Value(tiertest.Key(22), 5_000))

	other := o
	other.Namespace = o.Namespace + "-other"
	c := open(t, other)
	if st := c.Stats(); st.Blocks != 0 {
		t.Fatalf("another namespace sees %d blocks", st.Blocks)
	}
}

func TestCorruptObjectNeverServed(t *testing.T) {
	srv := s3test.Start(t)
	o := opts(srv, 64<<20)
	tr := open(t, o)
	putN(t, tr, 0, 5, 1_000)
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, srv, o.Namespace)
	if len(objs) != 1 {
		t.Fatalf("%d objects", len(objs))
	}
	// Flip a byte of block 2 in the file versitygw serves.
	path := filepath.Join(srv.Dir, srv.Bucket, objs[0].Key)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[2*1_000+17] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	k := tiertest.Key(2)
	if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrCorrupt) {
		t.Fatalf("Get of a corrupt block = %v, want ErrCorrupt", err)
	}
	if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("corrupt block not dropped: %v", err)
	}
	if st := tr.Stats(); st.Corrupt != 1 {
		t.Fatalf("Corrupt = %d", st.Corrupt)
	}
	for _, i := range []int{0, 1, 3, 4} {
		tiertest.CheckGet(t, tr, tiertest.Key(i), tiertest.Value(tiertest.Key(i), 1_000))
	}
	// A corrupt footer: the segment is skipped at load, never trusted.
	b[len(b)-30] ^= 0xff
	os.WriteFile(path, b, 0o644)
	tr2 := open(t, o)
	if st := tr2.Stats(); st.Blocks != 0 {
		t.Fatalf("blocks loaded from a segment with a corrupt footer: %d", st.Blocks)
	}
}

func TestCompactionDeletesDeadObjects(t *testing.T) {
	srv := s3test.Start(t)
	o := opts(srv, 64<<20)
	o.CompactBelow = 0.5
	tr := open(t, o)
	putN(t, tr, 0, 200, 10_000) // about 8 segments
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := objects(t, srv, o.Namespace)
	for i := range 200 {
		if i%5 != 0 { // 80% dead
			tr.Delete(tiertest.Key(i))
		}
	}
	var after []minio.ObjectInfo
	deadline := time.Now().Add(10 * time.Second)
	var bytesAfter int64
	for {
		after = objects(t, srv, o.Namespace)
		bytesAfter = 0
		for _, ob := range after {
			bytesAfter += ob.Size
		}
		if bytesAfter < 700_000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if bytesAfter >= 700_000 {
		t.Fatalf("after deleting 80%%: %d objects, %d bytes (was %d objects)", len(after), bytesAfter, len(before))
	}
	check := func(tr tier.Tier) {
		t.Helper()
		for i := range 200 {
			k := tiertest.Key(i)
			if i%5 == 0 {
				tiertest.CheckGet(t, tr, k, tiertest.Value(k, 10_000))
			} else if _, err := tr.Get(t.Context(), k); !errors.Is(err, tier.ErrNotFound) {
				t.Fatalf("deleted %d: %v", i, err)
			}
		}
	}
	check(tr)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(t, o))
}

func TestOpenErrorsNameTheSetting(t *testing.T) {
	srv := s3test.Start(t)
	f := func(name string, mod func(*s3.Options), want string) {
		t.Helper()
		o := opts(srv, 1<<20)
		o.RequestTimeout = 500 * time.Millisecond
		mod(&o)
		_, err := s3.Open(t.Context(), o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Open = %v, want an error naming %q", name, err, want)
		}
		if err != nil && strings.Contains(err.Error(), srv.SecretKey) {
			t.Errorf("%s: the error shows the secret key", name)
		}
	}
	f("no bucket", func(o *s3.Options) { o.Bucket = "" }, "s3.bucket is required")
	f("no endpoint", func(o *s3.Options) { o.Endpoint = "" }, "s3.endpoint is required")
	f("bad policy", func(o *s3.Options) { o.WhenDegraded = "later" }, "s3.when_degraded")
	f("missing bucket", func(o *s3.Options) { o.Bucket = "nope" }, `s3.bucket "nope" does not exist`)
	f("wrong credentials", func(o *s3.Options) { o.SecretAccessKey = "wrong" }, "s3 credentials")
	f("unreachable", func(o *s3.Options) { o.Endpoint = "127.0.0.1:1" }, "s3.endpoint 127.0.0.1:1 unreachable")

	// Asked to, it starts degraded and recovers once the bucket exists.
	o := opts(srv, 1<<20)
	o.Bucket = "later"
	o.DegradedOK = true
	tr := open(t, o)
	if h := tr.Health(); !h.Degraded || !strings.Contains(h.Reason, "later") {
		t.Fatalf("Health = %+v, want degraded naming the bucket", h)
	}
	if err := srv.Client().MakeBucket(t.Context(), "later", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, tr)
}

func waitHealthy(t *testing.T, tr *s3.Tier) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tr.Health().Degraded {
		if time.Now().After(deadline) {
			t.Fatalf("still degraded: %+v", tr.Health())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitDegraded(t *testing.T, tr *s3.Tier) tier.Health {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h := tr.Health(); h.Degraded {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatal("tier did not degrade")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFaultsDegradeAndRecover(t *testing.T) {
	srv := s3test.Start(t)
	for _, tc := range []struct {
		fault s3test.Fault
		cause string
	}{
		{s3test.Fail5xx, "write"},
		{s3test.Forbidden, "auth"},
		{s3test.Down, "write"},
		{s3test.Slow, "write"},
	} {
		t.Run(fmt.Sprint(tc.fault), func(t *testing.T) {
			px := s3test.NewProxy(t, srv)
			px.Delay = 3 * time.Second
			o := opts(srv, 64<<20)
			o.Endpoint = px.Endpoint
			o.RequestTimeout = time.Second
			o.MaxPending = o.SegmentSize
			tr := open(t, o)
			putN(t, tr, 0, 10, 10_000)
			if err := tr.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			px.Set(tc.fault)
			// Fill the open segment and the pending bytes: the upload
			// fails, the tier degrades and, with "drop", refuses more.
			var refused error
			start := time.Now()
			for i := 100; i < 200 && refused == nil; i++ {
				k := tiertest.Key(i)
				refused = tr.Put(t.Context(), k, tiertest.Value(k, 10_000), tier.PutOptions{})
			}
			if !errors.Is(refused, tier.ErrUnavailable) {
				t.Fatalf("puts while the bucket fails: %v, want ErrUnavailable", refused)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("refusing took %v", d)
			}
			h := waitDegraded(t, tr)
			if h.Cause != tc.cause {
				t.Errorf("cause %q, want %q (%s)", h.Cause, tc.cause, h.Reason)
			}
			// Blocks still in memory read back; uploaded ones fail fast.
			tiertest.CheckGet(t, tr, tiertest.Key(100), tiertest.Value(tiertest.Key(100), 10_000))
			start = time.Now()
			if _, err := tr.Get(t.Context(), tiertest.Key(0)); !errors.Is(err, tier.ErrUnavailable) {
				t.Fatalf("Get while degraded = %v", err)
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Fatalf("Get while degraded took %v", d)
			}
			px.Set(s3test.Pass)
			waitHealthy(t, tr)
			if err := tr.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if h := tr.Health(); h.Recoveries != 1 {
				t.Errorf("Recoveries = %d", h.Recoveries)
			}
			tiertest.CheckGet(t, tr, tiertest.Key(0), tiertest.Value(tiertest.Key(0), 10_000))
			tiertest.CheckGet(t, tr, tiertest.Key(100), tiertest.Value(tiertest.Key(100), 10_000))
		})
	}
}

func TestServerKilledAndRestarted(t *testing.T) {
	srv := s3test.Start(t)
	o := opts(srv, 64<<20)
	o.RequestTimeout = time.Second
	o.WhenDegraded = "wait"
	tr := open(t, o)
	putN(t, tr, 0, 10, 10_000)
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err) // nothing pending: no request
	}
	putN(t, tr, 10, 10, 10_000)
	if err := tr.Flush(t.Context()); !errors.Is(err, tier.ErrUnavailable) {
		t.Fatalf("Flush with the server down = %v", err)
	}
	waitDegraded(t, tr)
	// "wait": a put that needs room waits, until its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	var err error
	for i := 20; i < 200 && err == nil; i++ {
		k := tiertest.Key(i)
		err = tr.Put(ctx, k, tiertest.Value(k, 10_000), tier.PutOptions{})
	}
	if !errors.Is(err, tier.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put waiting for a dead bucket = %v", err)
	}
	srv.Restart()
	waitHealthy(t, tr)
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	tr2 := open(t, o)
	for i := range 20 {
		tiertest.CheckGet(t, tr2, tiertest.Key(i), tiertest.Value(tiertest.Key(i), 10_000))
	}
}
