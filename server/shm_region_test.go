package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/yuebing/yuebing/block"
)

// A client's own memfd, registered on its session's socket, is where the
// node reads puts from and writes gets to: the bytes arrive in the
// client's buffer with no segment between, whole blocks only, and a range
// past the region's end or another tenant's block writes nothing.
func TestShmRegisteredRegion(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, staging: true})
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: n.api.opts.Staging.Addr(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "{\"token\":%q,\"size\":%d}\n", tokAlpha, 4096)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || !bytes.Contains(buf[:nb], []byte(`"session"`)) {
		t.Fatalf("hello: %q %v", buf[:nb], err)
	}
	if msgs, _ := unix.ParseSocketControlMessage(oob[:noob]); len(msgs) == 1 {
		fds, _ := unix.ParseUnixRights(&msgs[0])
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	const size = 1 << 20
	fd, err := unix.MemfdCreate("engine-buffer", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)

	r := bufio.NewReader(c)
	call := func(req string, rights []byte) string {
		t.Helper()
		if _, _, err := c.WriteMsgUnix([]byte(req+"\n"), rights, nil); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	if got := call(`{"op":"register","size":1048576}`, unix.UnixRights(fd)); !strings.Contains(got, `"region":1`) {
		t.Fatalf("register: %s", got)
	}
	want := payload(9, 300000)
	copy(mem[4096:], want)
	if got := call(`{"op":"put","namespace":"alpha/llama","items":[{"name":"r","region":1,"offset":4096,"length":300000}]}`, nil); !strings.Contains(got, `"status":"created"`) {
		t.Fatalf("put from the region: %s", got)
	}
	if got := call(`{"op":"get","namespace":"alpha/llama","items":[{"name":"r","region":1,"offset":500000,"length":400000}]}`, nil); !strings.Contains(got, `"status":"ok"`) || !bytes.Equal(mem[500000:800000], want) {
		t.Fatalf("get into the region: %s", got)
	}
	// The stored block is the region's bytes at the put, not later ones.
	mem[4096] ^= 0xff
	if got := call(`{"op":"get","namespace":"alpha/llama","items":[{"name":"r","region":1,"offset":0,"length":300000}]}`, nil); !strings.Contains(got, `"status":"ok"`) || !bytes.Equal(mem[:300000], want) {
		t.Fatalf("get after the region changed: %s", got)
	}
	clear(mem[900000:])
	for req, want := range map[string]string{
		`{"op":"get","namespace":"alpha/llama","items":[{"name":"r","region":1,"offset":900000,"length":300000}]}`: "outside the 1048576-byte region",
		`{"op":"get","namespace":"alpha/llama","items":[{"name":"r","region":1,"offset":900000,"length":100000}]}`: "too_large",
		`{"op":"get","namespace":"alpha/llama","items":[{"name":"r","region":2,"offset":0,"length":300000}]}`:      "no region 2",
		`{"op":"get","namespace":"beta/llama","items":[{"name":"r","region":1,"offset":900000,"length":100000}]}`:  "forbidden",
		`{"op":"unregister","region":7}`: "no region 7",
	} {
		if got := call(req, nil); !strings.Contains(got, want) {
			t.Errorf("%s: %s, want %q", req, got, want)
		}
	}
	if !bytes.Equal(mem[900000:], make([]byte, size-900000)) {
		t.Fatal("a refused get wrote into the region")
	}
	if got := call(`{"op":"unregister","region":1}`, nil); strings.Contains(got, "error") {
		t.Fatalf("unregister: %s", got)
	}
	if got := call(`{"op":"get","namespace":"alpha/llama","items":[{"name":"r","region":1,"offset":0,"length":300000}]}`, nil); !strings.Contains(got, "no region 1") {
		t.Fatalf("get into an unregistered region: %s", got)
	}
	if n.api.opts.Staging.Regions() != 0 {
		t.Fatalf("%d bytes still mapped", n.api.opts.Staging.Regions())
	}
}

// shm.max_region_bytes bounds what the node maps for clients.
func TestShmMaxRegionBytes(t *testing.T) {
	n, _ := startShmNode(t, false, ShmConfig{MaxRegionBytes: 64 << 10})
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: n.staging.Addr(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "{\"size\":%d}\n", 4096)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || !bytes.Contains(buf[:nb], []byte(`"session"`)) {
		t.Fatalf("hello: %q %v", buf[:nb], err)
	}
	if msgs, _ := unix.ParseSocketControlMessage(oob[:noob]); len(msgs) == 1 {
		fds, _ := unix.ParseUnixRights(&msgs[0])
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	fd, err := unix.MemfdCreate("engine-buffer", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, 1<<20)
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
	r := bufio.NewReader(c)
	register := func(size int) string {
		t.Helper()
		if _, _, err := c.WriteMsgUnix([]byte(fmt.Sprintf("{\"op\":\"register\",\"size\":%d}\n", size)), unix.UnixRights(fd), nil); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	if got := register(1 << 20); !strings.Contains(got, "overloaded") || !strings.Contains(got, "of 65536 bytes") {
		t.Fatalf("a region over shm.max_region_bytes: %s", got)
	}
	if got := register(64 << 10); !strings.Contains(got, `"region":1`) {
		t.Fatalf("a region within it: %s", got)
	}
}

// registeredSession opens a staging session of tokAlpha's on n and
// registers a size-byte memfd in it as region 1; it returns the client's
// mapping and a call that sends one request line and reads the answer.
func registeredSession(t *testing.T, n *testNode, size int) ([]byte, func(req string) string) {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: n.api.opts.Staging.Addr(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "{\"token\":%q,\"size\":%d}\n", tokAlpha, 4096)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || !bytes.Contains(buf[:nb], []byte(`"session"`)) {
		t.Fatalf("hello: %q %v", buf[:nb], err)
	}
	if msgs, _ := unix.ParseSocketControlMessage(oob[:noob]); len(msgs) == 1 {
		fds, _ := unix.ParseUnixRights(&msgs[0])
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	fd, err := unix.MemfdCreate("engine-buffer", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	r := bufio.NewReader(c)
	send := func(req string, rights []byte) string {
		t.Helper()
		if _, _, err := c.WriteMsgUnix([]byte(req+"\n"), rights, nil); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	if got := send(fmt.Sprintf(`{"op":"register","size":%d}`, size), unix.UnixRights(fd)); !strings.Contains(got, `"region":1`) {
		t.Fatalf("register: %s", got)
	}
	return mem, func(req string) string { t.Helper(); return send(req, nil) }
}

// A batch big enough to be spread over cores (shmEach) answers every item
// in its own place, as one at a time would: each value lands at its own
// range, a missing key and a range outside the region fail alone, and of
// two puts of one key in a batch the first creates it.
func TestShmRegisteredBatchInOrder(t *testing.T) {
	n := startNode(t, nodeOpts{auth: true, staging: true})
	const size, part, count = 32 << 20, 1 << 20, 12
	mem, call := registeredSession(t, n, size)
	var items []string
	for i := range count {
		copy(mem[i*part:], payload(uint64(i+1), part))
		items = append(items, fmt.Sprintf(`{"name":"v%d","region":1,"offset":%d,"length":%d}`, i, i*part, part))
	}
	var res shmResponse
	decode := func(line string) {
		t.Helper()
		res = shmResponse{}
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
	}
	decode(call(`{"op":"put","namespace":"alpha/llama","items":[` + strings.Join(items, ",") + `]}`))
	if len(res.Results) != count {
		t.Fatalf("%d results for %d items", len(res.Results), count)
	}
	for i, r := range res.Results {
		if r.Status != "created" || r.Size != part || r.Key != block.OpaqueKey("alpha/llama", []byte(fmt.Sprintf("v%d", i))) {
			t.Errorf("put %d: %+v", i, r)
		}
	}
	// The same key twice: stored once, by the first item, from its bytes.
	copy(mem[28<<20:], payload(0xd1, part))
	copy(mem[29<<20:], payload(0xd2, part))
	decode(call(fmt.Sprintf(`{"op":"put","namespace":"alpha/llama","items":[{"name":"dup","region":1,"offset":%d,"length":%d},{"name":"dup","region":1,"offset":%d,"length":%d},{"name":"w","region":1,"offset":%d,"length":%d}]}`,
		28<<20, part, 29<<20, part, 29<<20, 2*part)))
	if len(res.Results) != 3 || res.Results[0].Status != "created" || res.Results[1].Status != "exists" || res.Results[2].Status != "created" {
		t.Fatalf("a batch putting one key twice: %+v", res.Results)
	}
	// Read them back, reversed, to the region's second half, with a
	// missing key and a range past the region's end among them.
	clear(mem[14<<20:])
	items = items[:0]
	for i := range count {
		items = append(items, fmt.Sprintf(`{"name":"v%d","region":1,"offset":%d,"length":%d}`, count-1-i, 14<<20+i*part, part))
	}
	items = append(items, fmt.Sprintf(`{"name":"nope","region":1,"offset":0,"length":%d}`, part),
		fmt.Sprintf(`{"name":"v0","region":1,"offset":%d,"length":%d}`, size-part/2, part),
		fmt.Sprintf(`{"name":"dup","region":1,"offset":%d,"length":%d}`, 29<<20, part))
	decode(call(`{"op":"get","namespace":"alpha/llama","items":[` + strings.Join(items, ",") + `]}`))
	if len(res.Results) != count+3 {
		t.Fatalf("%d results for %d items", len(res.Results), count+3)
	}
	for i := range count {
		r := res.Results[i]
		if r.Status != "ok" || r.Size != part || !bytes.Equal(mem[14<<20+i*part:14<<20+(i+1)*part], payload(uint64(count-i), part)) {
			t.Errorf("get %d: %+v, or other bytes", i, r.Status)
		}
	}
	if r := res.Results[count]; r.Status != "missing" {
		t.Errorf("a missing key: %+v", r)
	}
	if r := res.Results[count+1]; r.Status != "error" || r.Error == nil || !strings.Contains(r.Error.Message, "outside") {
		t.Errorf("a range past the region's end: %+v", r)
	}
	if r := res.Results[count+2]; r.Status != "ok" || !bytes.Equal(mem[29<<20:29<<20+part], payload(0xd1, part)) {
		t.Errorf("the key put twice reads %+v, not the first put's bytes", r)
	}
}
