package shm

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/rdma"
	"github.com/yuebing/yuebing/rdma/rdmatest"
	"github.com/yuebing/yuebing/rdma/wire"
)

func newEngine(t testing.TB, tr rdma.Transport) *rdma.Engine {
	t.Helper()
	e, err := rdma.New(rdma.Options{ClusterToken: rdmatest.Token}, tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestNotShared(t *testing.T) {
	server := newEngine(t, newTransport(t))
	if _, err := server.Register("plain", "cpu:0", make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	client := newEngine(t, newTransport(t))
	if _, err := client.OpenSegment(t.Context(), server.Addr(), "plain"); !errors.Is(err, rdma.ErrNotShared) {
		t.Fatalf("open plain segment over shm: %v", err)
	}
}

// TestGarbageOnSocket: peers that send junk are disconnected, and an
// established mapping keeps working.
func TestGarbageOnSocket(t *testing.T) {
	server := newEngine(t, newTransport(t))
	sm, err := rdma.NewSharedMemory("kv", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	copy(sm.Bytes(), bytes.Repeat([]byte("yuebing!"), 1<<17))
	if _, err := server.RegisterShared("kv", "cpu:0", sm); err != nil {
		t.Fatal(err)
	}
	client := newEngine(t, newTransport(t))
	local := make([]byte, 1<<20)
	lseg, _ := client.Register("buf", "cpu:0", local)
	remote, err := client.OpenSegment(t.Context(), server.Addr(), "kv")
	if err != nil {
		t.Fatal(err)
	}
	hello := wire.HelloMsg{Min: 1, Max: 1, Token: []byte(rdmatest.Token)}.Append(nil)
	var helloFrame bytes.Buffer
	wire.WriteFrame(&helloFrame, wire.Header{Version: 1, Type: wire.Hello}, hello)
	var readFrame [wire.HeaderSize]byte
	(&wire.Header{Version: 1, Type: wire.Read, Length: 10}).Put(readFrame[:])
	for name, stream := range map[string][]byte{
		"junk":             bytes.Repeat([]byte{0xff}, 1000),
		"truncated hello":  helloFrame.Bytes()[:30],
		"junk after hello": append(bytes.Clone(helloFrame.Bytes()), bytes.Repeat([]byte{0xff}, 100)...),
		"data frame":       append(bytes.Clone(helloFrame.Bytes()), readFrame[:]...),
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("unix", server.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			nc.Write(stream)
			nc.(*net.UnixConn).CloseWrite()
			if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("not disconnected: %v", err)
			}
		})
	}
	b, _ := client.AllocateBatch(1)
	b.Submit(t.Context(), rdma.Request{Op: rdma.Read, Local: lseg, Remote: remote, Length: 1 << 20})
	if st, err := b.Wait(t.Context()); err != nil || st.State != rdma.Completed || !bytes.Equal(local, sm.Bytes()) {
		t.Fatalf("transfer after garbage: %+v %v", st, err)
	}
}

// rogueServer answers one open with a frame and the descriptors the test
// chooses, to check what the client accepts before it maps anything.
func rogueServer(t *testing.T, size uint64, fds []int) (string, <-chan struct{}) {
	path := filepath.Join(t.TempDir(), "rogue.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		nc, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer nc.Close()
		c, err := wire.ServerHello(nc, nc, []byte(rdmatest.Token), 0)
		if err != nil {
			return
		}
		v := c.Version
		h, err := wire.ReadHeader(nc, make([]byte, wire.HeaderSize))
		if err != nil {
			return
		}
		name, _ := wire.ReadControl(nc, h, 255)
		payload := wire.Descriptor{Size: size, MaxSlice: 1, Name: string(name), Location: "cpu:0"}.Append(nil)
		var hdr [wire.HeaderSize]byte
		(&wire.Header{Version: v, Type: wire.OpenOK, ID: h.ID, Length: uint32(len(payload)), CRC: block.Checksum(payload)}).Put(hdr[:])
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		nc.WriteMsgUnix(append(hdr[:], payload...), oob, nil)
		io.Copy(io.Discard, nc)
	})
	return path, done
}

func memfd(t *testing.T, size int64, seals int) int {
	fd, err := unix.MemfdCreate("rogue", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

func TestRogueServerDescriptors(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	sealed := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	for _, tc := range []struct {
		name string
		size uint64
		fds  func() []int
	}{
		{"no descriptor", 4096, func() []int { return nil }},
		{"unsealed memfd", 4096, func() []int { return []int{memfd(t, 4096, 0)} }},
		{"smaller than announced", 8192, func() []int { return []int{memfd(t, 4096, sealed)} }},
		{"a pipe", 4096, func() []int { return []int{p[0]} }},
		{"two descriptors", 4096, func() []int { return []int{memfd(t, 4096, sealed), memfd(t, 4096, sealed)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds := tc.fds()
			before := openFDs(t)
			addr, served := rogueServer(t, tc.size, fds)
			client := newEngine(t, newTransport(t))
			after := openFDs(t) // the client's listener and its socket
			_, err := client.OpenSegment(t.Context(), addr, "kv")
			if !errors.Is(err, rdma.ErrProtocol) {
				t.Fatalf("open = %v, want ErrProtocol", err)
			}
			t.Log(err)
			<-served // the rogue's end of the connection is closed too
			if n := openFDs(t); n != after {
				t.Errorf("%d descriptors open after a refused open, %d before it (%d before the client)", n, after, before)
			}
		})
	}
	t.Run("sealed memfd is accepted", func(t *testing.T) {
		fd := memfd(t, 4096, sealed)
		unix.Pwrite(fd, []byte("hello"), 0)
		client := newEngine(t, newTransport(t))
		addr, _ := rogueServer(t, 4096, []int{fd})
		remote, err := client.OpenSegment(t.Context(), addr, "kv")
		if err != nil {
			t.Fatal(err)
		}
		local := make([]byte, 5)
		seg, _ := client.Register("buf", "cpu:0", local)
		b, _ := client.AllocateBatch(1)
		b.Submit(t.Context(), rdma.Request{Op: rdma.Read, Local: seg, Remote: remote, Length: 5})
		if st, _ := b.Wait(t.Context()); st.State != rdma.Completed || string(local) != "hello" {
			t.Fatalf("%+v %q", st, local)
		}
	})
}
