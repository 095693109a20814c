package shm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
)

// Transport is the shared-memory transport. It is safe for concurrent use.
type Transport struct {
	opts    Options
	env     rdma.Env
	token   []byte
	ln      *net.UnixListener
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	connSem chan struct{}
	srv     struct {
		sync.Mutex
		closed bool
		conns  map[net.Conn]struct{}
	}
}

var _ rdma.Transport = (*Transport)(nil)

// New returns a transport; the engine starts it.
func New(opts Options) (*Transport, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	t := &Transport{opts: opts, connSem: make(chan struct{}, opts.MaxConns)}
	t.ctx, t.stop = context.WithCancel(context.Background())
	t.srv.conns = map[net.Conn]struct{}{}
	return t, nil
}

// Name returns "shm".
func (t *Transport) Name() string { return "shm" }

// Start listens on the unix socket.
func (t *Transport) Start(env rdma.Env) error {
	if env.Segments == nil || env.Logger == nil {
		return fmt.Errorf("%w: incomplete environment", rdma.ErrInvalidRequest)
	}
	t.env, t.token = env, []byte(env.Token)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: t.opts.Socket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("shm: listen on %s: %w", t.opts.Socket, err)
	}
	t.ln = ln
	t.wg.Go(t.accept)
	return nil
}

// Addr returns the socket peers open segments through.
func (t *Transport) Addr() string { return t.opts.Socket }

// Close stops the listener, closes open connections and waits for them.
// Mappings that peers made stay valid: the memory lives until its last
// mapping goes.
func (t *Transport) Close() error {
	t.stop()
	t.srv.Lock()
	t.srv.closed = true
	conns := t.srv.conns
	t.srv.conns = nil
	t.srv.Unlock()
	if t.ln != nil {
		t.ln.Close()
	}
	for nc := range conns {
		nc.Close()
	}
	t.wg.Wait()
	return nil
}

func (t *Transport) accept() {
	for {
		c := wire.Accept(t.ctx, t.ln, t.connSem, t.env.Logger)
		if c == nil {
			return
		}
		nc := c.(*net.UnixConn)
		t.srv.Lock()
		if t.srv.closed {
			t.srv.Unlock()
			nc.Close()
			<-t.connSem
			return
		}
		t.srv.conns[nc] = struct{}{}
		t.wg.Go(func() {
			defer func() {
				nc.Close()
				t.srv.Lock()
				delete(t.srv.conns, nc)
				t.srv.Unlock()
				<-t.connSem
			}()
			if err := t.serve(nc); !errors.Is(err, io.EOF) && t.ctx.Err() == nil {
				t.env.Logger.Info("shm peer disconnected", "err", err)
			}
		})
		t.srv.Unlock()
	}
}

// serve answers Open requests on one connection, each with the segment's
// descriptor and its memfd attached (SCM_RIGHTS). It returns why the
// connection ended, never nil.
func (t *Transport) serve(nc *net.UnixConn) error {
	nc.SetDeadline(time.Now().Add(t.opts.Timeout))
	c, err := wire.ServerHello(nc, nc, t.token, 0)
	if err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	version := c.Version
	hdr := make([]byte, wire.HeaderSize)
	for {
		// A peer gets Timeout for each open; an idle connection is closed.
		nc.SetDeadline(time.Now().Add(t.opts.Timeout))
		h, err := wire.ReadHeader(nc, hdr)
		if err == nil && (h.Version != version || h.Type != wire.Open) {
			err = fmt.Errorf("%w: unexpected %s frame (version %d)", rdma.ErrProtocol, h.Type, h.Version)
		}
		var name []byte
		if err == nil {
			name, err = wire.ReadControl(nc, h, rdma.MaxNameLen)
		}
		if err != nil {
			if errors.Is(err, rdma.ErrProtocol) {
				wire.WriteError(nc, version, 0, err)
			}
			return err
		}
		if err := t.open(nc, version, h.ID, string(name)); err != nil {
			return err
		}
	}
}

func (t *Transport) open(nc *net.UnixConn, version uint8, id uint64, name string) error {
	seg, err := t.env.Segments.Lookup(name)
	if err == nil {
		// Pin it: the descriptor we send must stay open while we send it,
		// or its number could be reused for another file.
		seg, err = t.env.Segments.Acquire(seg.ID())
	}
	if err != nil {
		return wire.WriteError(nc, version, id, err)
	}
	defer seg.Release()
	sh := seg.Shared()
	if sh == nil {
		return wire.WriteError(nc, version, id, fmt.Errorf("%w: %q", rdma.ErrNotShared, name))
	}
	desc := wire.Descriptor{Size: seg.Size(), MaxSlice: uint32(min(seg.Size(), 1<<32-1)), Name: seg.Name(), Location: seg.Location()}
	payload := desc.Append(nil)
	var frame [wire.HeaderSize]byte
	h := wire.Header{Version: version, Type: wire.OpenOK, ID: id, Segment: seg.ID(), Length: uint32(len(payload))}
	h.CRC = checksum(payload)
	h.Put(frame[:])
	rc, err := sh.File().SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = rc.Control(func(fd uintptr) {
		_, _, werr = nc.WriteMsgUnix(append(frame[:], payload...), unix.UnixRights(int(fd)), nil)
	})
	if err != nil {
		return err
	}
	return werr
}
