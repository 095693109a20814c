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
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
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

// readFrom reads keys from node holder in one round trip: over the
// transfer service by key, or, from a peer whose transfer service predates
// reads by key, over POST /internal/v1/read. out[i] is nil when the holder
// does not hold keys[i], or when the read budget (MaxFetchBytes) ran out
// before it: the caller treats both as not read here. An error means the
// holder did not answer (ErrUnreachable) or answered garbage; blocks read
// before it are returned with it. Errors name the holder, never its
// address.
func (n *Node) readFrom(ctx context.Context, holder uint32, keys []block.Key) ([]*Remote, error) {
	out := make([]*Remote, len(keys))
	m, ok := n.memberByID(holder)
	if !ok {
		return out, fmt.Errorf("%w: node %d", ErrNotMember, holder)
	}
	ctx, done, err := n.fetchSlot(ctx)
	if err != nil {
		return out, err
	}
	defer done()
	var (
		ans answers
		st  rdma.BlockStream
	)
	err = rdma.ErrNotSupported
	if !n.httpReads {
		st, err = n.engine.GetBlocks(ctx, m.Addrs.Transfer, keys, n.opts.MaxFetchBytes)
	}
	switch {
	case err == nil:
		defer st.Close()
		ans = &streamAnswers{st: st}
	case errors.Is(err, rdma.ErrNotSupported):
		resp, err := n.send(ctx, n.fast, m, "/internal/v1/read", keysRequest{Keys: keys})
		if err != nil {
			return out, err
		}
		defer resp.Body.Close()
		ans = &frameAnswers{br: bufio.NewReaderSize(resp.Body, 64<<10), max: n.opts.MaxFetchBytes}
	default:
		return out, n.transferErr(ctx, m, err)
	}
	for i, k := range keys {
		a, err := ans.next()
		if err != nil {
			return out, fmt.Errorf("%w: %s broke off its answer: %v", ErrUnreachable, m.Name, err)
		}
		if !a.found {
			continue
		}
		w := max(a.size, 1)
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
		buf := getBuf(int(a.size))
		ref := &fetchRef{n: n, w: w, buf: buf, budget: giveBack}
		ref.refs.Store(1)
		if err := ans.read(buf); err != nil {
			ref.Release()
			return out, fmt.Errorf("%w: %s broke off its answer: %v", ErrUnreachable, m.Name, err)
		}
		if sum := block.Checksum(buf); sum != a.checksum {
			ref.Release()
			return out, fmt.Errorf("%w: %s from %s: crc32c %08x, holder says %08x", tier.ErrCorrupt, k, m.Name, sum, a.checksum)
		}
		n.stats.fetchedBytes.Add(a.size)
		out[i] = &Remote{Handle: tier.NewHandle(buf, a.checksum, ref), Origin: a.origin(m.Name)}
	}
	return out, nil
}

// fetchSlot takes one of the node's MaxFetches reads from other nodes and
// bounds ctx by RequestTimeout; done gives both back.
func (n *Node) fetchSlot(ctx context.Context) (_ context.Context, done func(), _ error) {
	if err := n.fetches.Acquire(ctx, 1); err != nil {
		return ctx, nil, err
	}
	n.stats.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, n.opts.RequestTimeout)
	return ctx, func() {
		cancel()
		n.fetches.Release(1)
	}, nil
}

// transferErr words a failure to read from m over the transfer service:
// the caller's context ending is that; anything else is m unreachable.
func (n *Node) transferErr(ctx context.Context, m Member, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		return cerr
	}
	n.log.Debug("cluster: transfer service of another node", "holder", m.Name, "err", err)
	return fmt.Errorf("%w: %s", ErrUnreachable, m.Name)
}

// answer is what a holder said about one key.
type answer struct {
	found       bool
	size        int64
	checksum    uint32
	pinnedUntil int64
	meta        []byte
}

func (a *answer) origin(source string) tier.Origin {
	o := tier.Origin{Level: tier.RemoteLevel, Source: source, Info: tier.BlockInfo{
		Size: a.size, Checksum: a.checksum, HasChecksum: true, Meta: a.meta,
	}}
	if len(a.meta) == 0 {
		o.Info.Meta = nil
	}
	if a.pinnedUntil > 0 {
		o.Info.PinnedUntil = time.Unix(a.pinnedUntil, 0)
	}
	return o
}

// answers reads a holder's answers in order: next, then read of a found
// block's bytes.
type answers interface {
	next() (answer, error)
	read(dst []byte) error
}

// streamAnswers reads them from the transfer service.
type streamAnswers struct{ st rdma.BlockStream }

func (s *streamAnswers) next() (answer, error) {
	info, err := s.st.Next()
	if err != nil || !info.Found {
		return answer{}, err
	}
	a := answer{found: true, size: info.Size, checksum: info.Checksum}
	a.pinnedUntil, a.meta, err = decodeAttr(info.Attr)
	return a, err
}

func (s *streamAnswers) read(dst []byte) error { return s.st.ReadData(dst) }

// frameAnswers reads them from an /internal/v1/read answer.
type frameAnswers struct {
	br  *bufio.Reader
	max int64
	hb  [frameHeaderSize]byte
}

func (f *frameAnswers) next() (answer, error) {
	if _, err := io.ReadFull(f.br, f.hb[:]); err != nil {
		return answer{}, err
	}
	fr, err := decodeFrame(f.hb[:], f.max)
	if err != nil || fr.Status == frameNotHeld {
		return answer{}, err
	}
	meta := make([]byte, fr.MetaLen)
	if _, err := io.ReadFull(f.br, meta); err != nil {
		return answer{}, err
	}
	return answer{found: true, size: int64(fr.Size), checksum: fr.Checksum, pinnedUntil: fr.PinnedUntil, meta: meta}, nil
}

func (f *frameAnswers) read(dst []byte) error {
	_, err := io.ReadFull(f.br, dst)
	return err
}

// A block's attribute on the transfer service is its pin, then its record:
//
//	pinned-until  8 bytes, little-endian Unix seconds (0: not pinned)
//	meta          the rest: the block's record, opaque here
const attrPinSize = 8

func encodeAttr(pinnedUntil int64, meta []byte) []byte {
	if len(meta) > wire.MaxBlockAttr-attrPinSize {
		meta = nil
	}
	b := make([]byte, attrPinSize, attrPinSize+len(meta))
	binary.LittleEndian.PutUint64(b, uint64(max(pinnedUntil, 0)))
	return append(b, meta...)
}

func decodeAttr(b []byte) (pinnedUntil int64, meta []byte, err error) {
	if len(b) < attrPinSize {
		return 0, nil, fmt.Errorf("%w: block attribute of %d bytes", ErrBadRequest, len(b))
	}
	pinnedUntil = int64(binary.LittleEndian.Uint64(b))
	if pinnedUntil < 0 {
		return 0, nil, fmt.Errorf("%w: negative pin %d", ErrBadRequest, pinnedUntil)
	}
	if len(b) > attrPinSize {
		meta = b[attrPinSize:]
	}
	return pinnedUntil, meta, nil
}

var _ rdma.BlockSource = (*Node)(nil)

// PinBlock implements rdma.BlockSource: the transfer service serves this
// node's blocks to other nodes' reads by key from here, straight from the
// pinned copy (the DRAM arena's own memory for a block held there).
func (n *Node) PinBlock(ctx context.Context, k block.Key) (rdma.PinnedBlock, bool) {
	h, _, err := n.store.GetLocal(ctx, k)
	if err != nil {
		// The reader was told this node holds it: tell the leader what it
		// does hold.
		n.rep.touch(k)
		return rdma.PinnedBlock{}, false
	}
	var (
		pinned int64
		meta   []byte
	)
	if info, _, err := n.store.Stat(k); err == nil {
		meta = info.Meta
		if !info.PinnedUntil.IsZero() {
			pinned = info.PinnedUntil.Unix()
		}
	}
	n.stats.served.Add(1)
	n.stats.serving.Add(1)
	return rdma.PinnedBlock{Data: h.Bytes(), Checksum: h.Checksum(), Attr: encodeAttr(pinned, meta), Release: func() {
		h.Release()
		n.stats.serving.Add(-1)
	}}, true
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
	n.sign(req, body)
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
