package shm

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/wire"
)

func checksum(p []byte) uint32 { return block.Checksum(p) }

// remote is a peer's segment mapped into our address space.
type remote struct {
	desc wire.Descriptor
	mem  []byte
}

func (r *remote) Desc() rdma.SegmentDesc {
	return rdma.SegmentDesc{Name: r.desc.Name, Location: r.desc.Location, Size: r.desc.Size}
}

// Close unmaps the segment. The engine calls it only after the last
// transfer that uses it.
func (r *remote) Close() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}

// Open connects to the peer's socket, authenticates, receives the segment's
// memfd and maps it. The descriptor is checked before it is mapped: it must
// be a regular file at least as large as announced and sealed against
// shrinking, so the peer cannot truncate it later and fault us.
func (t *Transport) Open(ctx context.Context, peer, name string) (rdma.Remote, error) {
	if t.ctx.Err() != nil {
		return nil, rdma.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	var d net.Dialer
	dc, err := d.DialContext(ctx, "unix", peer)
	if err != nil {
		return nil, fmt.Errorf("shm: dial %s: %w", peer, err)
	}
	nc := dc.(*net.UnixConn)
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	c, err := wire.ClientHello(nc, nc, t.token, 0)
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("shm: %w", err))
	}
	version := c.Version
	if err := wire.WriteFrame(nc, wire.Header{Version: version, Type: wire.Open, ID: 1}, []byte(name)); err != nil {
		return nil, ctxErr(ctx, err)
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	hdr := make([]byte, wire.HeaderSize)
	if err := readMsg(nc, hdr, &fds); err != nil {
		return nil, ctxErr(ctx, err)
	}
	h, err := wire.ParseHeader(hdr)
	if err != nil {
		return nil, err
	}
	if h.Length > wire.MaxControl {
		return nil, fmt.Errorf("%w: %s payload of %d bytes", rdma.ErrProtocol, h.Type, h.Length)
	}
	payload := make([]byte, h.Length)
	if err := readMsg(nc, payload, &fds); err != nil {
		return nil, ctxErr(ctx, err)
	}
	if checksum(payload) != h.CRC {
		return nil, fmt.Errorf("%w: %s payload CRC mismatch", rdma.ErrProtocol, h.Type)
	}
	switch {
	case h.Type == wire.Error:
		return nil, wire.PeerError(h, payload)
	case h.Type != wire.OpenOK || h.ID != 1 || h.Version != version:
		return nil, fmt.Errorf("%w: %s frame in answer to open", rdma.ErrProtocol, h.Type)
	case len(fds) != 1:
		return nil, fmt.Errorf("%w: open answer carried %d descriptors, want 1", rdma.ErrProtocol, len(fds))
	}
	desc, err := wire.ParseDescriptor(payload)
	if err != nil {
		return nil, err
	}
	if desc.Name != name {
		return nil, fmt.Errorf("%w: asked for segment %q, got %q", rdma.ErrProtocol, name, desc.Name)
	}
	mem, err := mapSealed(fds[0], desc.Size)
	if err != nil {
		return nil, err
	}
	return &remote{desc: desc, mem: mem}, nil
}

// readMsg fills buf from the stream, collecting any descriptors passed
// along the way. It makes room for one descriptor per read: a peer that
// sends more gets them discarded by the kernel (MSG_CTRUNC), which we
// report as a protocol error.
func readMsg(nc *net.UnixConn, buf []byte, fds *[]int) error {
	oob := make([]byte, unix.CmsgSpace(4))
	for got := 0; got < len(buf); {
		n, oobn, flags, _, err := nc.ReadMsgUnix(buf[got:], oob)
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				return fmt.Errorf("%w: control message: %w", rdma.ErrProtocol, perr)
			}
			for _, m := range msgs {
				rights, perr := unix.ParseUnixRights(&m)
				if perr == nil {
					*fds = append(*fds, rights...)
				}
			}
		}
		if flags&unix.MSG_CTRUNC != 0 {
			return fmt.Errorf("%w: peer sent more descriptors than asked for", rdma.ErrProtocol)
		}
		if err != nil {
			return fmt.Errorf("shm: open: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: peer closed the connection", rdma.ErrProtocol)
		}
		got += n
	}
	return nil
}

// mapSealed maps size bytes of fd after checking that the peer cannot
// shrink the file under the mapping.
func mapSealed(fd int, size uint64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%w: passed descriptor is not a memory file", rdma.ErrProtocol)
	}
	if st.Size < 0 || uint64(st.Size) < size || size > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("%w: segment of %d bytes announced, file has %d", rdma.ErrProtocol, size, st.Size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("%w: segment memory is not sealed against shrinking", rdma.ErrProtocol)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap: %w", err)
	}
	return mem, nil
}

// Transfer copies between local memory and the mapping, a chunk at a
// time so that a deadline is honoured mid-copy.
func (t *Transport) Transfer(ctx context.Context, task *rdma.Task) error {
	r, ok := task.Remote.(*remote)
	if !ok {
		return fmt.Errorf("%w: remote segment is not a shm segment", rdma.ErrInvalidRequest)
	}
	n := uint64(len(task.Local))
	if err := rdma.CheckRange(uint64(len(r.mem)), task.RemoteOffset, n); err != nil {
		return err
	}
	win := r.mem[task.RemoteOffset : task.RemoteOffset+n]
	chunk := t.opts.ChunkSize
	for done := 0; done < len(win); done += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(done+chunk, len(win))
		if task.Op == rdma.Read {
			copy(task.Local[done:end], win[done:end])
		} else {
			copy(win[done:end], task.Local[done:end])
		}
		task.Moved(end - done)
	}
	return nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}
