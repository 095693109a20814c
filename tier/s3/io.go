package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/policy"
)

// S3 operations, for the request counters.
const (
	opPut = iota
	opGet
	opList
	opDelete
	opHead
	numOps
)

var opNames = [numOps]string{"put", "get", "list", "delete", "head"}

func (t *Tier) count(op int, err error) {
	r := 0
	if err != nil {
		r = 1
	}
	t.reqs[op][r].Add(1)
}

// getRange reads [off, off+size) of an object.
func (t *Tier) getRange(ctx context.Context, name string, off, size int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
	defer cancel()
	var o minio.GetObjectOptions
	if err := o.SetRange(off, off+size-1); err != nil {
		return nil, err
	}
	obj, err := t.cl.GetObject(ctx, t.opts.Bucket, name, o)
	if err == nil {
		defer obj.Close()
		buf := make([]byte, size)
		_, err = io.ReadFull(obj, buf)
		if err == nil {
			t.count(opGet, nil)
			return buf, nil
		}
	}
	t.count(opGet, err)
	return nil, err
}

// loop uploads sealed segments, seals idle ones, compacts mostly dead ones,
// probes the bucket while degraded and lists it for other nodes' segments.
func (t *Tier) loop(ctx context.Context) {
	tick := time.NewTicker(min(t.opts.ProbeInterval, t.opts.FlushInterval))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
		case <-tick.C:
			t.mu.Lock()
			if o := t.mu.open; o != nil && time.Since(o.created) >= t.opts.FlushInterval {
				t.sealLocked()
			}
			t.mu.Unlock()
		}
		if t.Health().Degraded {
			if err := t.checkBucket(ctx); err != nil {
				continue
			}
			t.mu.Lock()
			load := t.mu.needLoad
			t.mu.Unlock()
			if load {
				if err := t.refresh(ctx); err != nil {
					continue
				}
				t.mu.Lock()
				t.mu.needLoad = false
				t.mu.Unlock()
			}
			t.recover()
		}
		if err := t.uploadPending(ctx); err != nil {
			continue
		}
		t.compactOne(ctx)
		t.mu.Lock()
		due := t.opts.RefreshInterval > 0 && time.Since(t.mu.lastRefresh) >= t.opts.RefreshInterval
		t.mu.Unlock()
		if due {
			if err := t.refresh(ctx); err != nil && ctx.Err() == nil {
				t.degrade("index", err)
			}
		}
	}
}

// uploadPending uploads sealed segments oldest first, then deletes the
// objects they replace.
func (t *Tier) uploadPending(ctx context.Context) error {
	// One uploader at a time (the loop, Flush, Close), so segments go up
	// in order and each once.
	t.upMu.Lock()
	defer t.upMu.Unlock()
	for {
		t.mu.Lock()
		if len(t.mu.pending) == 0 {
			t.mu.Unlock()
			return nil
		}
		s := t.mu.pending[0]
		t.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
		_, err := t.cl.PutObject(rctx, t.opts.Bucket, s.name, bytes.NewReader(s.obj), int64(len(s.obj)),
			minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true, DisableContentSha256: true})
		cancel()
		t.count(opPut, err)
		if err != nil {
			if ctx.Err() == nil {
				t.degrade("write", err)
			}
			return errUnavailable("upload", err)
		}
		t.mu.Lock()
		if t.mu.pending[0] != s {
			panic("BUG: s3: pending segments changed during an upload")
		}
		t.mu.pending = t.mu.pending[1:]
		s.uploaded = true
		s.data, s.obj = nil, nil
		t.mu.pendingBytes -= s.dataLen
		obs := s.obsoletes
		s.obsoletes = nil
		t.signalRoomLocked()
		t.mu.Unlock()
		for _, name := range obs {
			rctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
			err := t.cl.RemoveObject(rctx, t.opts.Bucket, name, minio.RemoveObjectOptions{})
			cancel()
			t.count(opDelete, err)
			if err != nil {
				// Left behind: a later load finds its blocks superseded
				// or tombstoned, and compaction tries it again.
				t.opts.Logger.Warn("s3: deleting a compacted segment failed", "segment", name, "err", err)
				t.mu.Lock()
				if o := t.mu.segs[name]; o != nil {
					o.obsolete = false
				}
				t.mu.Unlock()
				continue
			}
			t.mu.Lock()
			delete(t.mu.segs, name)
			t.mu.Unlock()
		}
	}
}

// compactOne rewrites the uploaded segment with the smallest live fraction
// below CompactBelow: its live blocks are read (one GET), verified, copied
// into the open segment with the tombstones it still carries, and the
// object is deleted once that segment is uploaded.
func (t *Tier) compactOne(ctx context.Context) {
	t.mu.Lock()
	var s *segment
	best := t.opts.CompactBelow
	for _, c := range t.mu.segs {
		if !c.uploaded || c.obsolete {
			continue
		}
		if c.dataLen == 0 {
			// A segment of tombstones only goes once every segment its
			// tombstones name is gone.
			if len(c.tombs) > 0 && t.liveTombsLocked(c) == 0 {
				s, best = c, -1
				break
			}
			continue
		}
		if frac := float64(c.live) / float64(c.dataLen); frac < best {
			s, best = c, frac
		}
	}
	if s == nil || t.mu.pendingBytes+s.live > int64(t.opts.MaxPending) {
		t.mu.Unlock()
		return
	}
	s.obsolete = true
	var lo, hi int64 = -1, 0
	for _, k := range s.keys {
		if e := t.mu.entries[k]; e != nil && e.seg == s && e.size > 0 {
			if lo < 0 || e.off < lo {
				lo = e.off
			}
			hi = max(hi, e.off+e.size)
		}
	}
	if lo < 0 && t.liveTombsLocked(s) == 0 {
		// Nothing to carry over: delete the object now.
		t.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
		err := t.cl.RemoveObject(rctx, t.opts.Bucket, s.name, minio.RemoveObjectOptions{})
		cancel()
		t.count(opDelete, err)
		if err != nil {
			t.mu.Lock()
			s.obsolete = false
			t.mu.Unlock()
			if ctx.Err() == nil {
				t.degrade("write", err)
			}
			return
		}
		t.forgetSegment(s)
		t.compactions.Add(1)
		return
	}
	t.mu.Unlock()
	var data []byte
	if lo >= 0 {
		var err error
		data, err = t.getRange(ctx, s.name, lo, hi-lo)
		if err != nil {
			t.mu.Lock()
			s.obsolete = false
			t.mu.Unlock()
			if isNoSuchKey(err) {
				t.forgetSegment(s)
			} else if ctx.Err() == nil {
				t.degrade("read", err)
			}
			return
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.openLocked()
	for _, k := range s.keys {
		e := t.mu.entries[k]
		if e == nil || e.seg != s {
			continue
		}
		var v []byte
		if e.size > 0 {
			v = data[e.off-lo : e.off-lo+e.size]
		}
		if block.Verify(v, uint64(e.size), e.crc) != nil {
			t.corrupt.Add(1)
			t.removeLocked(k, e, true)
			continue
		}
		s.live -= e.size
		e.seg, e.off = o, int64(len(o.data))
		o.data = append(o.data, v...)
		o.dataLen += e.size
		o.live += e.size
		o.keys = append(o.keys, k)
		t.mu.pendingBytes += e.size
	}
	for _, tb := range s.tombs {
		if _, ok := t.mu.segs[tb.Seg]; ok && tb.Seg != s.name {
			o.tombs = append(o.tombs, tb)
		}
	}
	o.obsoletes = append(o.obsoletes, s.name)
	t.sealLocked()
	t.compactions.Add(1)
}

// liveTombsLocked counts s's tombstones that name a segment still stored.
func (t *Tier) liveTombsLocked(s *segment) int {
	n := 0
	for _, tb := range s.tombs {
		if _, ok := t.mu.segs[tb.Seg]; ok && tb.Seg != s.name {
			n++
		}
	}
	return n
}

// forgetSegment drops the blocks of an object another node deleted.
func (t *Tier) forgetSegment(s *segment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range s.keys {
		if e := t.mu.entries[k]; e != nil && e.seg == s {
			delete(t.mu.entries, k)
			t.mu.pol.Remove(k)
			t.mu.used -= e.charge()
		}
	}
	delete(t.mu.segs, s.name)
}

// Refresh lists the bucket for segments this tier does not know yet (those
// other nodes sharing the namespace wrote) and loads their footers. Blocks
// it learns this way are readable at once.
func (t *Tier) Refresh(ctx context.Context) error {
	if err := t.refresh(ctx); err != nil {
		return errUnavailable("refresh", err)
	}
	return nil
}

func (t *Tier) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*t.opts.RequestTimeout)
	defer cancel()
	var objs []minio.ObjectInfo
	for o := range t.cl.ListObjects(ctx, t.opts.Bucket, minio.ListObjectsOptions{Prefix: t.prefix, Recursive: true}) {
		if o.Err != nil {
			t.count(opList, o.Err)
			return o.Err
		}
		objs = append(objs, o)
	}
	t.count(opList, nil)
	t.mu.Lock()
	t.mu.lastRefresh = time.Now()
	objs = slices.DeleteFunc(objs, func(o minio.ObjectInfo) bool {
		_, known := t.mu.segs[o.Key]
		return known || !strings.HasPrefix(o.Key, t.prefix)
	})
	t.mu.Unlock()
	slices.SortFunc(objs, func(a, b minio.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, o := range objs {
		f, dataLen, err := t.readFooter(ctx, o.Key, o.Size)
		if err != nil {
			if isNoSuchKey(err) {
				continue // compacted away since the listing
			}
			if isFormat(err) {
				t.opts.Logger.Warn("s3: skipping a malformed segment", "segment", o.Key, "err", err)
				continue
			}
			return err
		}
		t.apply(o.Key, f, dataLen)
	}
	return nil
}

func isFormat(err error) bool { return errors.Is(err, ErrFormat) }

// readFooter reads a segment's trailer and footer.
func (t *Tier) readFooter(ctx context.Context, name string, size int64) (*footer, int64, error) {
	if size < trailerSize {
		return nil, 0, fmt.Errorf("%w: %d-byte object", ErrFormat, size)
	}
	tr, err := t.getRange(ctx, name, size-trailerSize, trailerSize)
	if err != nil {
		return nil, 0, err
	}
	n, crc, version, err := parseTrailer(tr, size)
	if err != nil {
		return nil, 0, err
	}
	dataLen := size - trailerSize - n
	var p []byte
	if n > 0 {
		if p, err = t.getRange(ctx, name, dataLen, n); err != nil {
			return nil, 0, err
		}
	}
	f, err := decodeFooter(p, crc, dataLen, version)
	return f, dataLen, err
}

// apply adds a loaded segment to the index: its tombstones remove the
// blocks they name, then its blocks replace copies from older segments.
// Blocks this node put since it started are newer than any loaded copy.
func (t *Tier) apply(name string, f *footer, dataLen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.mu.segs[name]; known {
		return
	}
	s := &segment{name: name, dataLen: dataLen, uploaded: true, tombs: f.Tombs}
	t.mu.segs[name] = s
	for _, tb := range f.Tombs {
		if e := t.mu.entries[tb.Key]; e != nil && e.seg.name == tb.Seg && tb.Class {
			t.setClassLocked(tb.Key, e, tb.Retention, tb.RetainUntil)
			continue
		}
		if e := t.mu.entries[tb.Key]; e != nil && e.seg.name == tb.Seg && !tb.Class {
			delete(t.mu.entries, tb.Key)
			t.mu.pol.Remove(tb.Key)
			t.mu.used -= e.charge()
			e.seg.live -= e.size
		}
	}
	for _, fe := range f.Entries {
		if old := t.mu.entries[fe.Key]; old != nil {
			if !old.seg.uploaded || old.seg.name > name {
				continue
			}
			t.mu.pol.Remove(fe.Key)
			t.mu.used -= old.charge()
			old.seg.live -= old.size
		}
		e := &entry{seg: s, off: fe.Off, size: fe.Len, crc: fe.CRC, meta: fe.Meta, pinnedUntil: pinTime(fe.PinnedUntil), version: t.version.Add(1)}
		t.startClassLocked(fe.Key, e, fe.Retention, fe.RetainUntil)
		t.mu.entries[fe.Key] = e
		t.mu.pol.Add(fe.Key, policy.Info[block.Key]{Size: max(e.charge(), 1), Class: e.policyClass()})
		t.mu.used += e.charge()
		s.live += e.size
		s.keys = append(s.keys, fe.Key)
	}
	// Over capacity (another node wrote more, or the capacity shrank):
	// evict quietly, recording tombstones.
	evictable := t.evictableLocked()
	for t.mu.used > int64(t.opts.Capacity) {
		k, ok := t.mu.pol.Evict(evictable)
		if !ok {
			break
		}
		t.removeLocked(k, t.mu.entries[k], false)
		t.evictions.Add(1)
	}
}

// writer buffers a block for Create.
type writer struct {
	t    *Tier
	key  block.Key
	size int64
	opts tier.PutOptions
	buf  []byte
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, tier.ErrClosed
	}
	if int64(len(w.buf)+len(p)) > w.size {
		return 0, fmt.Errorf("%w: more than the %d bytes reserved", tier.ErrSize, w.size)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *writer) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	for {
		if int64(len(w.buf)) == w.size {
			var one [1]byte
			k, err := io.ReadFull(r, one[:])
			if k > 0 {
				return n, fmt.Errorf("%w: more than the %d bytes reserved", tier.ErrSize, w.size)
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return n, nil
			}
			return n, err
		}
		k, err := r.Read(w.buf[len(w.buf):w.size])
		w.buf = w.buf[:len(w.buf)+k]
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (w *writer) Commit(ctx context.Context) error {
	if w.done {
		return tier.ErrClosed
	}
	w.done = true
	if int64(len(w.buf)) != w.size {
		return fmt.Errorf("%w: %d bytes written, %d reserved", tier.ErrSize, len(w.buf), w.size)
	}
	sum := block.Checksum(w.buf)
	if w.opts.HasChecksum && sum != w.opts.Checksum {
		return tier.ErrChecksum
	}
	if err := w.t.precheck(w.key, w.size, w.opts); err != nil {
		return err
	}
	return w.t.put(ctx, w.key, w.buf, sum, w.opts)
}

func (w *writer) Abort() { w.done, w.buf = true, nil }
