package tcp

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/rdmatest"
	"github.com/yuebing/yuebing/rdma/wire"
)

const guard = 4096

func frame(h wire.Header, payload []byte) []byte {
	var b bytes.Buffer
	h.Version = wire.Version
	if h.Type == wire.Read {
		var hb [wire.HeaderSize]byte
		h.Put(hb[:])
		return hb[:]
	}
	wire.WriteFrame(&b, h, payload)
	return b.Bytes()
}

func helloFrame() []byte {
	return frame(wire.Header{Type: wire.Hello}, wire.HelloMsg{Min: 1, Max: 1, Token: []byte(rdmatest.Token)}.Append(nil))
}

// FuzzServe feeds a server connection an authenticated stream of arbitrary
// frames. Whatever arrives, the server must not panic, must not touch
// memory outside the registered segment, and must end the connection
// rather than hang once the stream ends.
func FuzzServe(f *testing.F) {
	tr := newTransport(f, Options{Topology: loopbackTopology(81, 1), MaxSliceSize: 1 << 16, IOTimeout: time.Second})
	e := newEngine(f, tr)
	big := make([]byte, guard+1<<16+guard)
	seg, err := e.Register("kv", "cpu:0", big[guard:guard+1<<16])
	if err != nil {
		f.Fatal(err)
	}
	id := seg.ID()
	f.Add(frame(wire.Header{Type: wire.Read, ID: 1, Segment: id, Offset: 10, Length: 100}, nil))
	f.Add(frame(wire.Header{Type: wire.Write, ID: 2, Segment: id, Offset: 1<<16 - 3, Length: 3}, []byte("abc")))
	f.Add(frame(wire.Header{Type: wire.Write, ID: 3, Segment: id, Offset: 1 << 16, Length: 3}, []byte("abc")))
	f.Add(frame(wire.Header{Type: wire.Open, ID: 4}, []byte("kv")))
	f.Add(append(frame(wire.Header{Type: wire.Read, ID: 5, Segment: id, Length: 1}, nil), frame(wire.Header{Type: wire.Open, ID: 6}, []byte("nope"))...))
	f.Add(frame(wire.Header{Type: wire.Fence, ID: 7, Segment: 1}, nil))
	f.Fuzz(func(t *testing.T, stream []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			tr.serve(server)
		}()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write(helloFrame())
		client.Write(stream)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("server did not end the connection")
		}
		if !allByte(big[:guard], 0) || !allByte(big[guard+1<<16:], 0) {
			t.Fatal("server wrote outside the segment")
		}
	})
}

// FuzzReceive feeds a client endpoint arbitrary answers while a read slice
// waits on it: the client may only ever write the slice's own bytes.
func FuzzReceive(f *testing.F) {
	tr := newTransport(f, Options{MaxSliceSize: 1 << 16, IOTimeout: time.Second})
	tr.env = rdma.Env{Logger: discardLogger()}
	const id, seg, off, n = 7, 9, 100, 1000
	good := frame(wire.Header{Type: wire.ReadData, ID: id, Segment: seg, Offset: off}, bytes.Repeat([]byte{1}, n))
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(frame(wire.Header{Type: wire.Error, ID: id, Code: wire.CodeOutOfRange}, []byte("no")))
	f.Add(frame(wire.Header{Type: wire.ReadData, ID: id + 1, Segment: seg, Offset: off}, bytes.Repeat([]byte{1}, n)))
	f.Add(frame(wire.Header{Type: wire.WriteOK, ID: id}, nil))
	f.Fuzz(func(t *testing.T, stream []byte) {
		big := make([]byte, guard+n+guard)
		client, server := net.Pipe()
		ep := newEndpoint(tr, rdma.Path{Remote: "fuzz"}, client, bufio.NewReaderSize(client, 4<<10), wire.Version)
		res := make(chan *slice, 1)
		s := &slice{id: id, op: rdma.Read, seg: seg, off: off, buf: big[guard : guard+n : guard+n], res: res}
		ep.slots <- struct{}{}
		s.ep = ep
		s.refs.Store(1) // no writer part: nothing is sent
		ep.mu.pending[id] = s
		done := make(chan struct{})
		go func() {
			defer close(done)
			ep.readLoop()
		}()
		server.SetWriteDeadline(time.Now().Add(2 * time.Second))
		server.Write(stream)
		server.Close()
		<-done
		select {
		case <-res:
		default:
			t.Fatal("the slice was never handed back")
		}
		if !allByte(big[:guard], 0) || !allByte(big[guard+n:], 0) {
			t.Fatal("client wrote outside the slice")
		}
	})
}
