package tcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
)

// errFenced ends a connection that a Fence from its own client retired.
var errFenced = errors.New("tcp: connection fenced by its client")

func (t *Transport) accept(ln net.Listener) {
	for {
		nc := wire.Accept(t.ctx, ln, t.connSem, t.env.Logger)
		if nc == nil {
			return
		}
		if !t.track(nc) {
			<-t.connSem
			nc.Close()
			return
		}
		t.wg.Go(func() {
			defer func() { t.untrack(nc); <-t.connSem }()
			t.serve(nc)
		})
	}
}

func (t *Transport) track(nc net.Conn) bool {
	t.srv.Lock()
	defer t.srv.Unlock()
	if t.srv.closed {
		return false
	}
	t.srv.conns[nc] = struct{}{}
	return true
}

func (t *Transport) untrack(nc net.Conn) {
	nc.Close()
	t.srv.Lock()
	defer t.srv.Unlock()
	delete(t.srv.conns, nc)
}

// serve answers one peer connection. Any framing error ends it: the
// connection's stream can no longer be trusted, but other connections are
// untouched.
func (t *Transport) serve(nc net.Conn) {
	s := &serverConn{t: t, nc: nc, br: bufio.NewReaderSize(nc, 4<<10)}
	if err := s.run(); err != nil && !errors.Is(err, io.EOF) && t.ctx.Err() == nil {
		t.env.Logger.Info("transfer peer disconnected", "peer", nc.RemoteAddr(), "err", err)
	}
}

type serverConn struct {
	t       *Transport
	nc      net.Conn
	br      *bufio.Reader
	version uint8
	id      uint64
	session uint64
	hdr     [wire.HeaderSize]byte
	// wmu is held while a Write's bytes go into memory; a Fence takes it to
	// wait for that, and sets fenced so no further Write lands.
	wmu    sync.Mutex
	fenced bool
}

func (s *serverConn) run() error {
	t := s.t
	s.nc.SetDeadline(time.Now().Add(t.opts.DialTimeout))
	if err := s.handshake(); err != nil {
		return err
	}
	s.nc.SetDeadline(time.Time{})
	t.srv.Lock()
	if t.srv.byID != nil {
		t.srv.byID[s.id] = s
	}
	t.srv.Unlock()
	defer func() {
		t.srv.Lock()
		delete(t.srv.byID, s.id)
		t.srv.Unlock()
	}()
	for {
		h, err := wire.ReadHeader(s.br, s.hdr[:])
		if err != nil {
			return s.fatal(err)
		}
		if h.Version != s.version {
			return s.fatal(fmt.Errorf("%w: frame version %d, agreed %d", rdma.ErrProtocol, h.Version, s.version))
		}
		switch h.Type {
		case wire.Open:
			err = s.open(h)
		case wire.Read:
			err = s.read(h)
		case wire.Write:
			err = s.write(h)
		case wire.Fence:
			err = s.fence(h)
		case wire.Get:
			err = s.get(h)
		default:
			err = fmt.Errorf("%w: unexpected %s frame", rdma.ErrProtocol, h.Type)
		}
		if err != nil {
			return s.fatal(err)
		}
	}
}

// fatal tells the peer why the connection ends, when it is a protocol
// matter and the stream can still carry a frame.
func (s *serverConn) fatal(err error) error {
	if errors.Is(err, rdma.ErrProtocol) || errors.Is(err, rdma.ErrAuth) || errors.Is(err, rdma.ErrVersion) {
		s.nc.SetWriteDeadline(time.Now().Add(time.Second))
		v := s.version
		if v == 0 {
			v = wire.Version
		}
		wire.WriteError(s.nc, v, 0, err)
	}
	return err
}

func (s *serverConn) handshake() error {
	c, err := wire.ServerHello(s.nc, s.br, s.t.token, s.t.connIDs.Add(1))
	if err != nil {
		return fmt.Errorf("tcp: %s: %w", s.nc.RemoteAddr(), err)
	}
	s.version, s.id, s.session = c.Version, c.ID, c.Session
	return nil
}

// fence ends the connection h names, if it belongs to this one's session,
// and returns once it is not writing into memory and never will again.
// Frames of this connection after the Fence are only read after that.
func (s *serverConn) fence(h wire.Header) error {
	if h.Length != 0 || h.CRC != 0 {
		return fmt.Errorf("%w: fence with a payload", rdma.ErrProtocol)
	}
	s.t.srv.Lock()
	old := s.t.srv.byID[h.Segment]
	s.t.srv.Unlock()
	if old == nil || old == s || old.session != s.session {
		return nil // gone already, or not ours to fence
	}
	old.nc.Close() // a Write stalled mid-payload fails now rather than at its deadline
	old.wmu.Lock()
	old.fenced = true
	old.wmu.Unlock()
	return nil
}

func (s *serverConn) reply(id uint64, err error) error {
	s.nc.SetWriteDeadline(time.Now().Add(s.t.opts.IOTimeout))
	return wire.WriteError(s.nc, s.version, id, err)
}

func (s *serverConn) open(h wire.Header) error {
	p, err := wire.ReadControl(s.br, h, rdma.MaxNameLen)
	if err != nil {
		return err
	}
	seg, err := s.t.env.Segments.Lookup(string(p))
	if err != nil {
		return s.reply(h.ID, err)
	}
	nics := s.t.opts.Topology.For(seg.Location())
	desc := wire.Descriptor{
		Size:      seg.Size(),
		MaxSlice:  uint32(s.t.opts.MaxSliceSize),
		Name:      seg.Name(),
		Location:  seg.Location(),
		Preferred: s.t.addrsOf(nics.Preferred),
		Secondary: s.t.addrsOf(nics.Secondary),
	}
	s.nc.SetWriteDeadline(time.Now().Add(s.t.opts.IOTimeout))
	return wire.WriteFrame(s.nc, wire.Header{Version: s.version, Type: wire.OpenOK, ID: h.ID, Segment: seg.ID()}, desc.Append(nil))
}

// addrsOf maps configured NICs to their listen addresses, at most
// wire.MaxNICs of them.
func (t *Transport) addrsOf(nics []string) []string {
	var out []string
	for _, nic := range nics {
		if a, ok := t.listen[nic]; ok && len(out) < wire.MaxNICs {
			out = append(out, a)
		}
	}
	return out
}

// checkLength validates a data frame's length before anything is allocated
// or read.
func (s *serverConn) checkLength(h wire.Header) error {
	if h.Length == 0 || int64(h.Length) > int64(s.t.opts.MaxSliceSize) {
		return fmt.Errorf("%w: %s of %d bytes, limit %d", rdma.ErrProtocol, h.Type, h.Length, s.t.opts.MaxSliceSize)
	}
	return nil
}

// read sends the asked range straight from registered memory.
func (s *serverConn) read(h wire.Header) error {
	if err := s.checkLength(h); err != nil {
		return s.reply(h.ID, err)
	}
	seg, err := s.t.env.Segments.Acquire(h.Segment)
	if err != nil {
		return s.reply(h.ID, err)
	}
	defer seg.Release()
	if err := rdma.CheckRange(seg.Size(), h.Offset, uint64(h.Length)); err != nil {
		return s.reply(h.ID, err)
	}
	data := seg.Bytes()[h.Offset : h.Offset+uint64(h.Length)]
	s.nc.SetWriteDeadline(time.Now().Add(s.t.opts.IOTimeout))
	return wire.WriteData(s.nc, wire.Header{Version: s.version, Type: wire.ReadData, ID: h.ID, Segment: h.Segment, Offset: h.Offset}, data)
}

// write receives a slice straight into registered memory. The bytes land
// before their CRC is checked (as an RDMA write lands before its
// completion): a mismatch fails the request, and the initiator must not
// treat the range as written.
func (s *serverConn) write(h wire.Header) error {
	if err := s.checkLength(h); err != nil {
		// The payload length is beyond what we will skip: the stream
		// cannot be resynchronised, so the connection ends.
		return err
	}
	seg, err := s.t.env.Segments.Acquire(h.Segment)
	if err != nil {
		return s.refuse(h, err)
	}
	if err := rdma.CheckRange(seg.Size(), h.Offset, uint64(h.Length)); err != nil {
		seg.Release()
		return s.refuse(h, err)
	}
	dst := seg.Bytes()[h.Offset : h.Offset+uint64(h.Length)]
	s.wmu.Lock()
	if s.fenced {
		s.wmu.Unlock()
		seg.Release()
		return errFenced
	}
	s.nc.SetReadDeadline(time.Now().Add(s.t.opts.IOTimeout))
	err = wire.RecvData(s.br, h, dst)
	s.wmu.Unlock()
	seg.Release()
	if errors.Is(err, rdma.ErrChecksum) {
		// The stream is intact (the trailer was where it should be); only
		// these bytes are bad.
		s.nc.SetReadDeadline(time.Time{})
		return s.reply(h.ID, err)
	}
	if err != nil {
		return err
	}
	s.nc.SetReadDeadline(time.Time{})
	s.nc.SetWriteDeadline(time.Now().Add(s.t.opts.IOTimeout))
	return wire.WriteFrame(s.nc, wire.Header{Version: s.version, Type: wire.WriteOK, ID: h.ID, Segment: h.Segment, Offset: h.Offset}, nil)
}

// refuse skips a write's payload (its length is already bounded by
// MaxSliceSize) and answers with err.
func (s *serverConn) refuse(h wire.Header, err error) error {
	s.nc.SetReadDeadline(time.Now().Add(s.t.opts.IOTimeout))
	if cerr := wire.SkipData(s.br, h); cerr != nil {
		return cerr
	}
	s.nc.SetReadDeadline(time.Time{})
	return s.reply(h.ID, err)
}
