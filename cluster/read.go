package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// A read is one round trip: the reader names up to maxReadKeys blocks in
// one POST /internal/v1/read and the holder answers with one frame per key,
// in order, written straight from its pinned copies. Each frame is
//
//	header  32 bytes: magic "YBF1", status u8 (0 found, 1 not held),
//	        0 u8, 0 u16, size u64, crc32c u32, meta length u32,
//	        pinned-until i64 (Unix seconds, 0 none)
//	meta    meta length bytes (the block's record, opaque here)
//	data    size bytes
//
// All integers are little-endian; a not-held frame has every other field
// zero. The reader verifies each block's CRC-32C before it serves a byte
// of it. There is no expose, no release and no segment to open: a read of
// one block costs the same single round trip as a read of 64.
const (
	frameMagic      = "YBF1"
	frameHeaderSize = 32
	frameFound      = 0
	frameNotHeld    = 1
	// maxReadKeys bounds the keys of one read request.
	maxReadKeys = 1024
	// maxFrameMeta bounds a frame's metadata: a block's record is a few
	// hundred bytes at most.
	maxFrameMeta = 64 << 10
)

// frame is a decoded frame header.
type frame struct {
	Status      uint8
	Size        uint64
	Checksum    uint32
	MetaLen     uint32
	PinnedUntil int64
}

func (f *frame) encode(b *[frameHeaderSize]byte) {
	*b = [frameHeaderSize]byte{}
	copy(b[0:4], frameMagic)
	b[4] = f.Status
	binary.LittleEndian.PutUint64(b[8:], f.Size)
	binary.LittleEndian.PutUint32(b[16:], f.Checksum)
	binary.LittleEndian.PutUint32(b[20:], f.MetaLen)
	binary.LittleEndian.PutUint64(b[24:], uint64(f.PinnedUntil))
}

// decodeFrame parses a frame header, refusing sizes over maxSize. It never
// panics.
func decodeFrame(b []byte, maxSize int64) (frame, error) {
	if len(b) != frameHeaderSize {
		return frame{}, fmt.Errorf("%w: frame header of %d bytes", ErrBadRequest, len(b))
	}
	if string(b[0:4]) != frameMagic {
		return frame{}, fmt.Errorf("%w: bad frame magic %q", ErrBadRequest, b[0:4])
	}
	f := frame{
		Status: b[4], Size: binary.LittleEndian.Uint64(b[8:]), Checksum: binary.LittleEndian.Uint32(b[16:]),
		MetaLen: binary.LittleEndian.Uint32(b[20:]), PinnedUntil: int64(binary.LittleEndian.Uint64(b[24:])),
	}
	switch {
	case b[5] != 0 || b[6] != 0 || b[7] != 0:
		return frame{}, fmt.Errorf("%w: frame reserved bytes set", ErrBadRequest)
	case f.Status == frameNotHeld && (f.Size != 0 || f.Checksum != 0 || f.MetaLen != 0 || f.PinnedUntil != 0):
		return frame{}, fmt.Errorf("%w: a not-held frame with fields set", ErrBadRequest)
	case f.Status != frameFound && f.Status != frameNotHeld:
		return frame{}, fmt.Errorf("%w: frame status %d", ErrBadRequest, f.Status)
	case f.Size > uint64(max(maxSize, 0)):
		return frame{}, fmt.Errorf("%w: frame of %d bytes, at most %d", ErrBadRequest, f.Size, maxSize)
	case f.MetaLen > maxFrameMeta:
		return frame{}, fmt.Errorf("%w: frame metadata of %d bytes", ErrBadRequest, f.MetaLen)
	case f.PinnedUntil < 0:
		return frame{}, fmt.Errorf("%w: negative pin %d", ErrBadRequest, f.PinnedUntil)
	}
	return f, nil
}

// handleRead serves POST /internal/v1/read: the frames of the keys asked,
// from this node's local tiers only.
func (n *Node) handleRead(w http.ResponseWriter, r *http.Request) {
	var req keysRequest
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if len(req.Keys) == 0 || len(req.Keys) > maxReadKeys {
		writeError(w, fmt.Errorf("%w: %d keys, want 1 to %d", ErrBadRequest, len(req.Keys), maxReadKeys))
		return
	}
	n.stats.serving.Add(1)
	defer n.stats.serving.Add(-1)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	var hb [frameHeaderSize]byte
	for _, k := range req.Keys {
		f := frame{Status: frameNotHeld}
		h, _, err := n.store.GetLocal(r.Context(), k)
		var meta []byte
		if err == nil {
			f = frame{Status: frameFound, Size: uint64(h.Len()), Checksum: h.Checksum()}
			if info, _, err := n.store.Stat(k); err == nil {
				meta = info.Meta
				if !info.PinnedUntil.IsZero() {
					f.PinnedUntil = max(info.PinnedUntil.Unix(), 0)
				}
			}
			if len(meta) > maxFrameMeta {
				meta = nil
			}
			f.MetaLen = uint32(len(meta))
			n.stats.served.Add(1)
		} else {
			// The reader was told this node holds it: tell the leader what
			// it does hold.
			n.rep.touch(k)
		}
		f.encode(&hb)
		_, werr := w.Write(hb[:])
		if werr == nil && len(meta) > 0 {
			_, werr = w.Write(meta)
		}
		if h != nil {
			if werr == nil && h.Len() > 0 {
				_, werr = w.Write(h.Bytes())
			}
			h.Release()
		}
		if werr != nil {
			return // the reader went away
		}
	}
}

// readFrom reads keys from node holder in one round trip. out[i] is nil
// when the holder does not hold keys[i], or when the read budget
// (MaxFetchBytes) ran out before it: the caller treats both as not read
// here. An error means the holder did not answer (ErrUnreachable) or
// answered garbage; blocks read before it are returned with it. Errors
// name the holder, never its address.
func (n *Node) readFrom(ctx context.Context, holder uint32, keys []block.Key) ([]*Remote, error) {
	out := make([]*Remote, len(keys))
	m, ok := n.memberByID(holder)
	if !ok {
		return out, fmt.Errorf("%w: node %d", ErrNotMember, holder)
	}
	if err := n.fetches.Acquire(ctx, 1); err != nil {
		return out, err
	}
	defer n.fetches.Release(1)
	n.stats.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, n.opts.RequestTimeout)
	defer cancel()
	resp, err := n.send(ctx, n.fast, m, "/internal/v1/read", keysRequest{Keys: keys})
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var hb [frameHeaderSize]byte
	for i, k := range keys {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			return out, fmt.Errorf("%w: %s broke off its answer: %v", ErrUnreachable, m.Name, err)
		}
		f, err := decodeFrame(hb[:], n.opts.MaxFetchBytes)
		if err != nil {
			return out, fmt.Errorf("%s: %w", m.Name, err)
		}
		if f.Status == frameNotHeld {
			continue
		}
		meta := make([]byte, f.MetaLen)
		if _, err := io.ReadFull(br, meta); err != nil {
			return out, fmt.Errorf("%w: %s broke off its answer: %v", ErrUnreachable, m.Name, err)
		}
		w := max(int64(f.Size), 1)
		if i == 0 {
			err = n.bytes.Acquire(ctx, w)
		} else if !n.bytes.TryAcquire(w) {
			// Holding earlier blocks while waiting for room could wait on
			// ourselves: the rest of the batch is read another time.
			return out, nil
		}
		if err != nil {
			return out, err
		}
		giveBack, ok, err := n.charge(ctx, w, i == 0)
		if !ok {
			n.bytes.Release(w)
			return out, err
		}
		buf := getBuf(int(f.Size))
		ref := &fetchRef{n: n, w: w, buf: buf, budget: giveBack}
		ref.refs.Store(1)
		if _, err := io.ReadFull(br, buf); err != nil {
			ref.Release()
			return out, fmt.Errorf("%w: %s broke off its answer: %v", ErrUnreachable, m.Name, err)
		}
		if sum := block.Checksum(buf); sum != f.Checksum {
			ref.Release()
			return out, fmt.Errorf("%w: %s from %s: crc32c %08x, holder says %08x", tier.ErrCorrupt, k, m.Name, sum, f.Checksum)
		}
		n.stats.fetchedBytes.Add(int64(f.Size))
		o := tier.Origin{Level: tier.RemoteLevel, Source: m.Name, Info: tier.BlockInfo{
			Size: int64(f.Size), Checksum: f.Checksum, HasChecksum: true, Meta: meta,
		}}
		if len(meta) == 0 {
			o.Info.Meta = nil
		}
		if f.PinnedUntil > 0 {
			o.Info.PinnedUntil = time.Unix(f.PinnedUntil, 0)
		}
		out[i] = &Remote{Handle: tier.NewHandle(buf, f.Checksum, ref), Origin: o}
	}
	return out, nil
}

// charge takes w bytes from the node's shared budget, if it has one. The
// first block of a read may wait the budget's bounded wait; later ones take
// what is free now, as with MaxFetchBytes. ok false with a nil error: the
// rest of the batch is read another time.
func (n *Node) charge(ctx context.Context, w int64, first bool) (giveBack func(), ok bool, err error) {
	if n.opts.Budget == nil {
		return func() {}, true, nil
	}
	if !first {
		giveBack, ok = n.opts.Budget.TryAcquire(w)
		return giveBack, ok, nil
	}
	giveBack, err = n.opts.Budget.Acquire(ctx, w)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return giveBack, true, nil
}

// send posts a JSON request to member m's internal API with client c and
// returns the answer when it is a 200. Failing to reach m, or m not
// answering within the client's header timeout, is ErrUnreachable; an error
// answer is the sentinel of its code. The errors name m, never its address.
func (n *Node) send(ctx context.Context, c *http.Client, m Member, path string, in any) (*http.Response, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return n.sendRaw(ctx, c, m, path, body)
}

func (n *Node) sendRaw(ctx context.Context, c *http.Client, m Member, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.Addrs.HTTP+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s has a bad address", ErrUnreachable, m.Name)
	}
	req.Header.Set("Authorization", "Bearer "+n.opts.Token)
	resp, err := c.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
			return nil, cerr
		}
		return nil, fmt.Errorf("%w: %s", ErrUnreachable, m.Name)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, answerError(resp, m.Name)
	}
	return resp, nil
}

// call is send with a JSON answer decoded into out.
func (n *Node) call(ctx context.Context, c *http.Client, m Member, path string, in, out any) error {
	resp, err := n.send(ctx, c, m, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out); err != nil {
		return fmt.Errorf("%w: %s: %s: decoding the answer: %v", ErrUnreachable, m.Name, path, err)
	}
	return nil
}
