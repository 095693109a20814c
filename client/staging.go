package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
)

// Staging is a same-host shared-memory session with the node (docs/api.md,
// "Shared memory"): a segment both processes map, and the session's own
// unix socket, on which a multi-get asks the node to copy blocks into ranges
// of the segment and a multi-put to store ranges of it. No block byte
// crosses a socket. Calls on one Staging run one at a time (the node
// answers a session's requests in order); a call cut short by an error or
// its context leaves the session broken, and every later call fails with
// ErrStagingBroken.
type Staging struct {
	conn *net.UnixConn
	r    *bufio.Reader
	mem  []byte
	id   string

	mu     sync.Mutex
	broken bool
	rd     bytes.Reader
	line   []byte
	res    stagingAnswer
	// regions are the caller's buffers registered in this session, by
	// the node's id (Register).
	regions map[Region]uint32

	// staged counts block bytes copied between the segment and the
	// caller's memory (GetBatch, PutBatch); direct those the node moved
	// straight into or out of a registered region (GetInto, PutFrom).
	staged, direct atomic.Int64
}

// ErrStagingBroken reports a call on a Staging that an earlier failure
// left unusable: open another.
var ErrStagingBroken = errors.New("client: shared-memory session broken")

// ErrRegionRefused reports a region the node would not map (a node too
// old to know regions, shm.max_region_bytes reached, a descriptor it
// cannot map safely); it wraps the node's *Error. Nothing was moved and
// the session is still usable: the caller goes through the segment.
var ErrRegionRefused = errors.New("client: region refused by the node")

// stagingAlign keeps every block's range page-aligned: the node's copies
// start aligned and neighbours share no cache line.
const stagingAlign = 4096

// OpenStaging opens a shared-memory session of size bytes with the node: it
// asks GET /v1/shm for the node's unix socket and connects to it. That
// works only on the node's host (an abstract socket lives in the host's
// network namespace); on another host, or with shared memory off on the
// node, it fails, and the caller uses HTTP.
func (c *Client) OpenStaging(ctx context.Context, size int64) (*Staging, error) {
	var info struct {
		Socket string `json:"socket"`
	}
	if err := c.doJSON(ctx, http.MethodGet, "/v1/shm", nil, &info, http.StatusOK); err != nil {
		return nil, err
	}
	if info.Socket == "" {
		return nil, fmt.Errorf("%w: GET /v1/shm named no socket", ErrProtocol)
	}
	size = (size + stagingAlign - 1) / stagingAlign * stagingAlign
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", info.Socket)
	if err != nil {
		return nil, fmt.Errorf("client: shared memory: %w", err)
	}
	conn := nc.(*net.UnixConn)
	s, err := handshake(ctx, conn, c.token, size)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

func handshake(ctx context.Context, conn *net.UnixConn, token string, size int64) (*Staging, error) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	hello, _ := json.Marshal(struct {
		Token string `json:"token"`
		Size  int64  `json:"size"`
	}{token, size})
	if _, err := conn.Write(append(hello, '\n')); err != nil {
		return nil, fmt.Errorf("client: shared memory: %w", err)
	}
	// The answer line comes in one message with the descriptor.
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("client: shared memory: %w", err)
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				if r, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, r...)
				}
			}
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	var ans struct {
		Session string `json:"session"`
		Size    int64  `json:"size"`
		Error   *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(buf[:n]), &ans); err != nil {
		return nil, fmt.Errorf("%w: shared-memory answer %q: %v", ErrProtocol, buf[:min(n, 200)], err)
	}
	if ans.Error != nil {
		return nil, &Error{StatusCode: stagingStatus(ans.Error.Code), Code: ans.Error.Code, Message: ans.Error.Message}
	}
	if flags&unix.MSG_CTRUNC != 0 || len(fds) != 1 || ans.Session == "" || ans.Size != size {
		return nil, fmt.Errorf("%w: shared-memory answer %q with %d descriptors", ErrProtocol, buf[:min(n, 200)], len(fds))
	}
	mem, err := mapSegment(fds[0], size)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return &Staging{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), mem: mem, id: ans.Session, regions: map[Region]uint32{}}, nil
}

// stagingStatus maps a staging error code to the HTTP status the API uses
// for it, so Error unwraps to the same sentinels.
func stagingStatus(code string) int {
	switch code {
	case "overloaded":
		return http.StatusTooManyRequests
	case "unavailable":
		return http.StatusServiceUnavailable
	case "unauthenticated":
		return http.StatusUnauthorized
	case "too_large":
		return http.StatusRequestEntityTooLarge
	case "not_found":
		return http.StatusNotFound
	case "forbidden":
		return http.StatusForbidden
	}
	return http.StatusBadRequest
}

// mapSegment maps the node's memfd after checking it cannot shrink under
// the mapping (a shrunk file turns an access into SIGBUS).
func mapSegment(fd int, size int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("client: shared memory: fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < size {
		return nil, fmt.Errorf("%w: shared-memory segment of %d bytes announced, the file has %d", ErrProtocol, size, st.Size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("%w: shared-memory segment is not sealed against shrinking", ErrProtocol)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("client: shared memory: mmap: %w", err)
	}
	return mem, nil
}

// Size is the segment's size: the bytes one call can move.
func (s *Staging) Size() int64 { return int64(len(s.mem)) }

// Close ends the session: the node frees the segment.
func (s *Staging) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = true
	err := s.conn.Close()
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
	return err
}

// Broken reports whether the session is unusable.
func (s *Staging) Broken() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

type stagingItem struct {
	Key    block.Key  `json:"key"`
	Offset int64      `json:"offset"`
	Length int64      `json:"length"`
	Parent *block.Key `json:"parent,omitempty"`
}

// parentOf is a put item's parent for the wire: nil when it has none, so
// a node older than parents sees the request it always did.
func parentOf(k block.Key, ok bool) *block.Key {
	if !ok {
		return nil
	}
	return &k
}

type stagingRequest struct {
	Op        string        `json:"op"`
	Namespace string        `json:"namespace"`
	Items     []stagingItem `json:"items"`
}

type stagingResult struct {
	Key    block.Key `json:"key"`
	Status string    `json:"status"`
	Size   int64     `json:"size"`
	Crc32c string    `json:"crc32c"`
	Tier   string    `json:"tier"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// itemError is a put result's error as an *Error matching the sentinels
// a single request's would, or nil for a stored block. A result saying
// "error" without a body is still one.
func itemError(r stagingResult) *Error {
	if r.Status != "error" && r.Error == nil {
		return nil
	}
	e := &Error{StatusCode: http.StatusBadRequest, Code: "unknown"}
	if r.Error != nil {
		e.StatusCode, e.Code, e.Message = stagingStatus(r.Error.Code), r.Error.Code, r.Error.Message
	}
	return e
}

type stagingAnswer struct {
	Results []stagingResult `json:"results"`
	Error   *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends one request line and reads its answer into s.res. Any
// failure breaks the session: its answer could arrive for the next call.
func (s *Staging) call(ctx context.Context, req any, items int) error {
	if s.broken {
		return ErrStagingBroken
	}
	var err error
	s.line, err = appendJSON(s.line[:0], req)
	if err != nil {
		return err
	}
	ans, err := s.roundTrip(ctx, s.line, nil)
	if err != nil {
		return err
	}
	s.res = stagingAnswer{}
	if err := json.Unmarshal(ans, &s.res); err != nil {
		s.broken = true
		s.conn.Close()
		return fmt.Errorf("%w: shared-memory answer: %v", ErrProtocol, err)
	}
	if s.res.Error != nil && s.res.Results == nil {
		return &Error{StatusCode: stagingStatus(s.res.Error.Code), Code: s.res.Error.Code, Message: s.res.Error.Message}
	}
	if len(s.res.Results) != items {
		s.broken = true
		s.conn.Close()
		return fmt.Errorf("%w: %d results for %d items", ErrProtocol, len(s.res.Results), items)
	}
	return nil
}

// roundTrip sends line, with the descriptors in oob, and returns the
// answer line, valid until the next call. Any failure breaks the session.
func (s *Staging) roundTrip(ctx context.Context, line, oob []byte) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { s.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fail := func(err error) error {
		s.broken = true
		s.conn.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("client: shared memory: %w: %w", ctx.Err(), err)
		}
		return fmt.Errorf("client: shared memory: %w", err)
	}
	var err error
	if oob != nil {
		_, _, err = s.conn.WriteMsgUnix(line, oob, nil)
	} else {
		_, err = s.conn.Write(line)
	}
	if err != nil {
		return nil, fail(err)
	}
	ans, err := s.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A long answer: gather it.
		s.line = append(s.line[:0], ans...)
		for err == bufio.ErrBufferFull {
			ans, err = s.r.ReadSlice('\n')
			s.line = append(s.line, ans...)
		}
		ans = s.line
	}
	if err != nil {
		return nil, fail(err)
	}
	return ans, nil
}

func appendJSON(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("client: encoding request: %w", err)
	}
	return append(append(dst, b...), '\n'), nil
}

func aligned(n int64) int64 { return max(stagingAlign, (n+stagingAlign-1)/stagingAlign*stagingAlign) }

// GetBatch is Client.GetBatch through the segment: the node copies block
// i into a range of sizes[i] bytes (its size, or more), and fn reads it
// from there, once the node has answered for all the blocks of a call.
// Bytes fn reads are verified against the block's checksum once fn returns:
// a mismatch fails with ErrChecksum. Keys whose ranges do not fit the
// segment together go in several calls, in order. A block not stored, or
// larger than its range, comes as a missing frame.
func (s *Staging) GetBatch(ctx context.Context, namespace string, keys []block.Key, sizes []int64, fn func(Frame, io.Reader) error) error {
	if len(sizes) != len(keys) {
		return fmt.Errorf("%w: %d sizes for %d keys", ErrBadRequest, len(sizes), len(keys))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	req := stagingRequest{Op: "get", Namespace: namespace}
	for i := 0; i < len(keys); {
		req.Items = req.Items[:0]
		var off int64
		for ; i < len(keys); i++ {
			n := aligned(sizes[i])
			if n > int64(len(s.mem)) {
				return fmt.Errorf("%w: a block of %d bytes does not fit a %d-byte segment", ErrTooLarge, sizes[i], len(s.mem))
			}
			if off+n > int64(len(s.mem)) {
				break
			}
			req.Items = append(req.Items, stagingItem{Key: keys[i], Offset: off, Length: sizes[i]})
			off += n
		}
		if err := s.call(ctx, &req, len(req.Items)); err != nil {
			return err
		}
		for j, r := range s.res.Results {
			it := req.Items[j]
			f := Frame{Key: it.Key, Missing: r.Status != "ok"}
			var sum uint64
			if !f.Missing {
				var err error
				sum, err = strconv.ParseUint(r.Crc32c, 16, 32)
				if err != nil || r.Size < 0 || r.Size > it.Length {
					s.broken = true
					return fmt.Errorf("%w: shared-memory result %d: size %d, crc32c %q", ErrProtocol, j, r.Size, r.Crc32c)
				}
				f.Length, f.Checksum = r.Size, uint32(sum)
				f.Tier = tierLevel(r.Tier)
			}
			s.rd.Reset(s.mem[it.Offset : it.Offset+f.Length])
			data := &checkingReader{block.CRCReader{R: &s.rd}}
			err := fn(f, data)
			s.staged.Add(data.N)
			if err != nil {
				return err
			}
			if !f.Missing && data.N == f.Length && data.Sum != f.Checksum {
				return fmt.Errorf("%w: block %s: crc32c %08x in shared memory, server sent %08x", ErrChecksum, f.Key, data.Sum, f.Checksum)
			}
		}
	}
	return nil
}

// tierLevel maps a tier name of a shared-memory answer to a Frame's Tier.
func tierLevel(name string) int {
	switch name {
	case "dram", "":
		return 0
	case "remote":
		return TierRemote
	}
	return 1
}

// PutBatch is Client.PutBatch through the segment: the items' bytes are
// copied into it and the node stores each range as a block. Items that do
// not fit the segment together go in several calls.
func (s *Staging) PutBatch(ctx context.Context, namespace string, items []Item) ([]ItemResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ItemResult, 0, len(items))
	var errs []error
	req := stagingRequest{Op: "put", Namespace: namespace}
	for i := 0; i < len(items); {
		req.Items = req.Items[:0]
		var off int64
		for ; i < len(items); i++ {
			size := int64(len(items[i].Data))
			n := aligned(size)
			if n > int64(len(s.mem)) {
				return out, fmt.Errorf("%w: a block of %d bytes does not fit a %d-byte segment", ErrTooLarge, size, len(s.mem))
			}
			if off+n > int64(len(s.mem)) {
				break
			}
			s.staged.Add(int64(copy(s.mem[off:], items[i].Data)))
			req.Items = append(req.Items, stagingItem{Key: items[i].Key, Offset: off, Length: size, Parent: parentOf(items[i].Parent, items[i].HasParent)})
			off += n
		}
		if err := s.call(ctx, &req, len(req.Items)); err != nil {
			return out, err
		}
		for _, r := range s.res.Results {
			ir := ItemResult{Key: r.Key, Status: r.Status, Tier: r.Tier, Size: r.Size}
			if e := itemError(r); e != nil {
				ir.Err = e
				errs = append(errs, fmt.Errorf("block %s: %w", r.Key, e))
			}
			out = append(out, ir)
		}
	}
	return out, errors.Join(errs...)
}

// Region is memory of the caller's that the node on this host maps itself:
// a memfd sealed against shrinking (rdma.SharedMemory is one), whose
// mapping Bytes is. Once registered with a session (Register), GetInto has
// the node copy blocks straight into it and PutFrom has the node store
// blocks straight out of it: one copy, the node's, and nothing through the
// segment. The caller owns the region: it must outlive the sessions it is
// registered with, or be unregistered from them first (Unregister).
type Region interface {
	// File is the memfd; sessions never close it.
	File() *os.File
	// Bytes is the caller's mapping of the whole region.
	Bytes() []byte
}

// RegionItem is one block and its range of a registered region.
type RegionItem struct {
	Key    block.Key
	Region Region
	// Offset and Length are the range of Region.Bytes(): a get copies the
	// block into it (the block must fit; it may be shorter), a put stores
	// exactly these bytes.
	Offset, Length int64
	// Parent, with HasParent, is a put's chain parent, as Item's; a get
	// ignores it.
	Parent    block.Key
	HasParent bool
}

type regionItem struct {
	Key    block.Key  `json:"key"`
	Region uint32     `json:"region"`
	Offset int64      `json:"offset"`
	Length int64      `json:"length"`
	Parent *block.Key `json:"parent,omitempty"`
}

type regionRequest struct {
	Op        string       `json:"op"`
	Namespace string       `json:"namespace"`
	Items     []regionItem `json:"items"`
}

// Register has the node map r and returns the node's id for it; a region
// already registered in this session returns its id at once. A node that
// refuses it (too old to know regions, shm.max_region_bytes reached, a
// descriptor it cannot map safely) fails with an *Error; the session stays
// usable either way.
func (s *Staging) Register(ctx context.Context, r Region) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registerLocked(ctx, r)
}

func (s *Staging) registerLocked(ctx context.Context, r Region) (uint32, error) {
	if id, ok := s.regions[r]; ok {
		return id, nil
	}
	if s.broken {
		return 0, ErrStagingBroken
	}
	size := len(r.Bytes())
	if size == 0 {
		return 0, fmt.Errorf("%w: an empty region", ErrBadRequest)
	}
	line := fmt.Appendf(nil, "{\"op\":\"register\",\"size\":%d}\n", size)
	ans, err := s.roundTrip(ctx, line, unix.UnixRights(int(r.File().Fd())))
	if err != nil {
		return 0, err
	}
	var a struct {
		Region uint32 `json:"region"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ans, &a); err != nil {
		s.broken = true
		s.conn.Close()
		return 0, fmt.Errorf("%w: register answer: %v", ErrProtocol, err)
	}
	if a.Error != nil {
		return 0, fmt.Errorf("%w: %d bytes: %w", ErrRegionRefused, size, &Error{StatusCode: stagingStatus(a.Error.Code), Code: a.Error.Code, Message: a.Error.Message})
	}
	if a.Region == 0 {
		return 0, fmt.Errorf("%w: register answer %q names no region", ErrProtocol, ans)
	}
	s.regions[r] = a.Region
	return a.Region, nil
}

// Unregister has the node unmap r, once no request of this session uses
// it; a region not registered here is a no-op.
func (s *Staging) Unregister(ctx context.Context, r Region) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.regions[r]
	if !ok {
		return nil
	}
	delete(s.regions, r)
	if s.broken {
		return nil // the session's end unmapped it
	}
	ans, err := s.roundTrip(ctx, fmt.Appendf(nil, "{\"op\":\"unregister\",\"region\":%d}\n", id), nil)
	if err != nil {
		return err
	}
	if bytes.Contains(ans, []byte(`"error"`)) {
		return fmt.Errorf("%w: unregister answer %q", ErrProtocol, ans)
	}
	return nil
}

// regionRanges registers the items' regions and checks their ranges.
func (s *Staging) regionRanges(ctx context.Context, op, namespace string, items []RegionItem) (*regionRequest, error) {
	req := &regionRequest{Op: op, Namespace: namespace, Items: make([]regionItem, len(items))}
	for i, it := range items {
		if it.Region == nil {
			return nil, fmt.Errorf("%w: item %d names no region", ErrBadRequest, i)
		}
		if n := int64(len(it.Region.Bytes())); it.Offset < 0 || it.Length <= 0 || it.Offset > n || it.Length > n-it.Offset {
			return nil, fmt.Errorf("%w: item %d: range [%d, +%d) of a %d-byte region", ErrBadRequest, i, it.Offset, it.Length, n)
		}
		id, err := s.registerLocked(ctx, it.Region)
		if err != nil {
			return nil, err
		}
		req.Items[i] = regionItem{Key: it.Key, Region: id, Offset: it.Offset, Length: it.Length}
		if op == "put" {
			req.Items[i].Parent = parentOf(it.Parent, it.HasParent)
		}
	}
	return req, nil
}

// GetInto has the node copy each item's block straight into its range of a
// registered region (registering regions on first use), then calls fn for
// each item in order with its frame: Missing for a block not stored or
// larger than its range, else its Length bytes at the range's start,
// already verified against the block's CRC-32C. A mismatch ends the call
// with ErrChecksum before fn sees the item; the items before it are good.
// No byte goes through the segment.
func (s *Staging) GetInto(ctx context.Context, namespace string, items []RegionItem, fn func(i int, f Frame) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, err := s.regionRanges(ctx, "get", namespace, items)
	if err != nil {
		return err
	}
	if err := s.call(ctx, req, len(req.Items)); err != nil {
		return err
	}
	for i, r := range s.res.Results {
		it := items[i]
		f := Frame{Key: it.Key, Missing: r.Status != "ok"}
		if !f.Missing {
			sum, err := strconv.ParseUint(r.Crc32c, 16, 32)
			if err != nil || r.Size < 0 || r.Size > it.Length {
				s.broken = true
				return fmt.Errorf("%w: shared-memory result %d: size %d, crc32c %q", ErrProtocol, i, r.Size, r.Crc32c)
			}
			f.Length, f.Checksum, f.Tier = r.Size, uint32(sum), tierLevel(r.Tier)
			// The node wrote the caller's memory; reading it back once is
			// what the end-to-end check costs here (no copy).
			if got := block.Checksum(it.Region.Bytes()[it.Offset : it.Offset+f.Length]); got != f.Checksum {
				return fmt.Errorf("%w: block %s: crc32c %08x in the registered region, server sent %08x", ErrChecksum, f.Key, got, f.Checksum)
			}
			s.direct.Add(f.Length)
		}
		if err := fn(i, f); err != nil {
			return err
		}
	}
	return nil
}

// PutFrom has the node store each item's range of a registered region as
// a block (registering regions on first use): the node copies the bytes
// once, into its store, and nothing goes through the segment. The region
// must not change until PutFrom returns.
func (s *Staging) PutFrom(ctx context.Context, namespace string, items []RegionItem) ([]ItemResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, err := s.regionRanges(ctx, "put", namespace, items)
	if err != nil {
		return nil, err
	}
	if err := s.call(ctx, req, len(req.Items)); err != nil {
		return nil, err
	}
	out := make([]ItemResult, 0, len(items))
	var errs []error
	for i, r := range s.res.Results {
		ir := ItemResult{Key: r.Key, Status: r.Status, Tier: r.Tier, Size: r.Size}
		if e := itemError(r); e != nil {
			ir.Err = e
			errs = append(errs, fmt.Errorf("block %s: %w", r.Key, e))
		} else {
			s.direct.Add(items[i].Length)
		}
		out = append(out, ir)
	}
	return out, errors.Join(errs...)
}

// StagingCounters are a session's totals of block bytes moved.
type StagingCounters struct {
	// StagedBytes were copied between the segment and the caller's memory
	// (GetBatch, PutBatch): the copy registered regions avoid.
	StagedBytes int64
	// DirectBytes the node moved straight into or out of registered
	// regions (GetInto, PutFrom).
	DirectBytes int64
}

// Counters returns the session's totals; safe to call at any time.
func (s *Staging) Counters() StagingCounters {
	return StagingCounters{StagedBytes: s.staged.Load(), DirectBytes: s.direct.Load()}
}
