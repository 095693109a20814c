package staging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// memfd is a client buffer of size bytes; seals are added to it.
func memfd(t *testing.T, size int, seals int) (fd int, mem []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("region-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return fd, mem
}

// regionClient sends request lines on a session's socket, a descriptor
// with some, and reads the answers.
type regionClient struct {
	t *testing.T
	c *net.UnixConn
	r *bufio.Reader
}

func (rc *regionClient) call(line string, fd int) map[string]any {
	rc.t.Helper()
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := rc.c.WriteMsgUnix([]byte(line+"\n"), oob, nil); err != nil {
		rc.t.Fatal(err)
	}
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	ans, err := rc.r.ReadBytes('\n')
	if err != nil {
		rc.t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(ans, &out); err != nil {
		rc.t.Fatalf("answer %q: %v", ans, err)
	}
	return out
}

// A region registered with its descriptor is the client's buffer, mapped
// by the server: what a request writes there, the client reads in its
// own mapping, and ranges outside it do not exist. Bad descriptors, sizes
// and limits are refused with a reason; the session's end unmaps every
// region.
func TestRegions(t *testing.T) {
	// The handler writes "hello" at the offset the line names into the
	// region it names, as the server's gets do.
	handle := func(_ context.Context, s *Session, line []byte) []byte {
		var req struct {
			Region uint32
			Offset int
		}
		json.Unmarshal(line, &req)
		mem, ok := s.Region(req.Region)
		if !ok || req.Offset < 0 || req.Offset+5 > len(mem) {
			return []byte(`{"error":{"code":"bad_request"}}`)
		}
		if _, err := Copy(mem[req.Offset:], []byte("hello")); err != nil {
			return []byte(`{"error":{"code":"fault"}}`)
		}
		return []byte(`{"ok":true}`)
	}
	s := newServer(t, Options{Handle: handle, MaxRegions: 2, MaxRegionBytes: 3 << 20})
	c, a, _ := open(t, s, `{"size":4096}`+"\n")
	if a.Error != nil {
		t.Fatal(a.Error)
	}
	rc := &regionClient{t: t, c: c, r: bufio.NewReader(c)}

	fd, mem := memfd(t, 1<<20, unix.F_SEAL_SHRINK)
	got := rc.call(`{"op":"register","size":1048576}`, fd)
	if got["region"] != 1.0 || got["size"] != 1048576.0 {
		t.Fatalf("register: %v", got)
	}
	if got := rc.call(`{"region":1,"offset":1000}`, -1); got["ok"] != true {
		t.Fatalf("write into the region: %v", got)
	}
	if string(mem[1000:1005]) != "hello" {
		t.Fatalf("the client's buffer holds %q", mem[1000:1005])
	}
	if got := rc.call(`{"region":1,"offset":1048572}`, -1); got["error"] == nil {
		t.Fatalf("a range past the region's end: %v", got)
	}
	if s.Regions() != 1<<20 {
		t.Fatalf("mapped %d", s.Regions())
	}

	refused := func(line string, fd int, want string) {
		t.Helper()
		got := rc.call(line, fd)
		e, _ := got["error"].(map[string]any)
		if e == nil || !strings.Contains(fmt.Sprint(e["message"]), want) {
			t.Errorf("%s: %v, want an error saying %q", line, got, want)
		}
	}
	unsealed, _ := memfd(t, 4096, 0)
	refused(`{"op":"register","size":4096}`, unsealed, "F_SEAL_SHRINK")
	refused(`{"op":"register","size":4096}`, -1, "descriptor")
	small, _ := memfd(t, 4096, unix.F_SEAL_SHRINK)
	refused(`{"op":"register","size":8192}`, small, "file's 4096 bytes")
	refused(`{"op":"register","size":-1}`, small, "size -1")
	p, w, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(w)
	refused(`{"op":"register","size":4096}`, p, "not a memory file")
	unix.Close(p)
	big, _ := memfd(t, 4<<20, unix.F_SEAL_SHRINK)
	refused(`{"op":"register","size":4194304}`, big, "registered regions map")
	refused(`{"op":"unregister","region":9}`, -1, "no region 9")
	two, _ := memfd(t, 4096, unix.F_SEAL_SHRINK)
	if got := rc.call(`{"op":"register","size":4096}`, two); got["region"] != 2.0 {
		t.Fatalf("second region: %v", got)
	}
	refused(`{"op":"register","size":4096}`, small, "at most 2")
	if got := rc.call(`{"op":"unregister","region":2}`, -1); got["error"] != nil {
		t.Fatalf("unregister: %v", got)
	}
	if got := rc.call(`{"region":2,"offset":0}`, -1); got["error"] == nil {
		t.Fatalf("an unregistered region is still written: %v", got)
	}

	c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for s.Regions() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Regions() != 0 {
		t.Fatalf("after the session ended %d bytes are still mapped", s.Regions())
	}
}

func pipe() (int, int, error) {
	var p [2]int
	err := unix.Pipe2(p[:], unix.O_CLOEXEC)
	return p[0], p[1], err
}

// Copy into memory that faults (a mapping past its file's end) fails
// instead of killing the process.
func TestCopyFaults(t *testing.T) {
	fd, mem := memfd(t, 8192, 0)
	if err := unix.Ftruncate(fd, 0); err != nil {
		t.Fatal(err)
	}
	n, err := Copy(mem, []byte("hello"))
	if err == nil || !strings.Contains(err.Error(), "faulted") || n != 0 {
		t.Fatalf("copy into a truncated mapping: %d, %v", n, err)
	}
	if n, err := Copy(make([]byte, 5), []byte("hello")); n != 5 || err != nil {
		t.Fatalf("plain copy: %d %v", n, err)
	}
}

// A copy large enough to be split lands every byte where a plain copy
// would, and a fault in any part (here: the whole mapping past its file's
// end) still fails the copy instead of killing the process.
func TestCopySplit(t *testing.T) {
	const size = 3*parallelMin + 12345
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i*7 + i>>12)
	}
	for _, n := range []int{parallelMin - 1, parallelMin, 2*parallelMin + 1, size} {
		dst := make([]byte, size)
		got, err := Copy(dst, src[:n])
		if err != nil || got != n || !bytes.Equal(dst[:n], src[:n]) || !bytes.Equal(dst[n:], make([]byte, size-n)) {
			t.Fatalf("copy of %d bytes: %d, %v", n, got, err)
		}
	}
	fd, mem := memfd(t, size, 0)
	if err := unix.Ftruncate(fd, parallelMin); err != nil {
		t.Fatal(err)
	}
	if n, err := Copy(mem, src); err == nil || !strings.Contains(err.Error(), "faulted") || n != 0 {
		t.Fatalf("split copy into a truncated mapping: %d, %v", n, err)
	}
}

// One memfd registered on two sessions is mapped once and counted once
// against MaxRegionBytes; it stays mapped, and written, for one session
// after the other ends, and is unmapped with the last.
func TestRegionSharedBySessions(t *testing.T) {
	handle := func(_ context.Context, s *Session, line []byte) []byte {
		mem, ok := s.Region(1)
		if !ok {
			return []byte(`{"error":{"code":"bad_request"}}`)
		}
		if _, err := Copy(mem[len(line):], line); err != nil {
			return []byte(`{"error":{"code":"fault"}}`)
		}
		return []byte(`{"ok":true}`)
	}
	s := newServer(t, Options{Handle: handle, MaxRegionBytes: 1 << 20})
	fd, mem := memfd(t, 1<<20, unix.F_SEAL_SHRINK)
	var rcs []*regionClient
	for range 2 {
		c, a, _ := open(t, s, `{"size":4096}`+"\n")
		if a.Error != nil {
			t.Fatal(a.Error)
		}
		rc := &regionClient{t: t, c: c, r: bufio.NewReader(c)}
		if got := rc.call(`{"op":"register","size":1048576}`, fd); got["region"] != 1.0 {
			t.Fatalf("register on session %d: %v", len(rcs), got)
		}
		rcs = append(rcs, rc)
	}
	if s.Regions() != 1<<20 {
		t.Fatalf("one file on two sessions maps %d bytes", s.Regions())
	}
	rcs[0].c.Close()
	if got := rcs[1].call(`{"x":"second"}`, -1); got["ok"] != true || !bytes.Contains(mem, []byte(`{"x":"second"}`)) {
		t.Fatalf("the other session's region after the first ended: %v", got)
	}
	rcs[1].c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for s.Regions() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Regions() != 0 {
		t.Fatalf("after both sessions ended %d bytes are still mapped", s.Regions())
	}
}
