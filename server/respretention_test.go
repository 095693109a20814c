package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/internal/bytesize"
	"github.com/yuebing/yuebing/server/resp"
)

// respCall sends one command and reads its one-line reply, or a bulk
// reply's header.
func respCall(t *testing.T, conn net.Conn, br *bufio.Reader, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(line, "\r\n")
}

// respNode is a RESP front end over a real API and store, wired as a node
// wires them, over a store in dir that a test can reopen.
type respNode struct {
	api   *API
	addr  string
	close func()
}

func startRESPNode(t *testing.T, dir string, quota bytesize.Size) *respNode {
	t.Helper()
	store := newTestStore(t, dir, 4<<20)
	api, err := NewAPI(APIOptions{Store: store, ContextsFile: dir + "/contexts.json", Retention: RetentionOptions{PinnedQuota: &quota}})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := resp.NewServer(resp.Options{Store: store, Retain: api.retainRESP})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rs.Serve(ln)
	var once sync.Once
	n := &respNode{api: api, addr: ln.Addr().String(), close: func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rs.Shutdown(ctx)
			// A node's shutdown flushes DRAM to the SSD, so what it
			// held is there at the next start.
			if _, err := store.Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
			}
			api.Close()
			store.Close()
		})
	}}
	t.Cleanup(n.close)
	return n
}

func (n *respNode) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// TestRESPRetentionPinQuota runs the RESP front end over a real API, as
// a node wires them: SET ... RETENTION pinned is charged against the
// namespace's retention.pinned_quota, a SET over it stores nothing, and
// YUEBING.RETAIN ... normal gives the charge back.
func TestRESPRetentionPinQuota(t *testing.T) {
	quota := bytesize.Size(150 << 10)
	n := startRESPNode(t, t.TempDir(), quota)
	conn, br := n.dial(t)
	api := n.api
	val := strings.Repeat("p", 100<<10)
	const ns = "default/redis"

	if r := respCall(t, conn, br, "SET", "a", val, "RETENTION", "pinned"); r != "+OK" {
		t.Fatalf("first pinned SET = %q", r)
	}
	if got := api.PinnedBytes()[ns]; got != 100<<10 {
		t.Fatalf("pinned bytes after one pin = %d; want %d", got, 100<<10)
	}
	r := respCall(t, conn, br, "SET", "b", val, "RETENTION", "pinned")
	if !strings.HasPrefix(r, "-ERR RETENTION pinned") || !strings.Contains(r, "quota") {
		t.Fatalf("pinned SET over the quota = %q; want -ERR naming the pin quota", r)
	}
	if r := respCall(t, conn, br, "EXISTS", "b"); r != ":0" {
		t.Fatalf("EXISTS b after the refused SET = %q; want nothing stored", r)
	}
	if got := api.PinnedBytes()[ns]; got != 100<<10 {
		t.Fatalf("pinned bytes after a refusal = %d; want it unchanged", got)
	}
	// A plain SET of the same key is not a pin and is not refused.
	if r := respCall(t, conn, br, "SET", "b", val, "RETENTION", "high"); r != "+OK" {
		t.Fatalf("high SET = %q", r)
	}
	if r := respCall(t, conn, br, "YUEBING.RETAIN", "a", "normal"); r != ":1" {
		t.Fatalf("release = %q", r)
	}
	if got := api.PinnedBytes()[ns]; got != 0 {
		t.Fatalf("pinned bytes after the release = %d; want 0", got)
	}
	if r := respCall(t, conn, br, "YUEBING.RETAIN", "b", "pinned", "TTL", "60"); r != ":1" {
		t.Fatalf("pinning b in place = %q", r)
	}
	if got := api.PinnedBytes()[ns]; got != 100<<10 {
		t.Fatalf("pinned bytes after pinning b = %d; want %d", got, 100<<10)
	}
}

// TestRESPPinsRechargedAtRestart: a RESP hard pin is on the SSD with the
// key's record, and a node restarted on the same store charges it to the
// Redis namespace again, as it does HTTP pins, so the quota still holds
// after the restart and a release still gives the charge back.
func TestRESPPinsRechargedAtRestart(t *testing.T) {
	dir := t.TempDir()
	quota := bytesize.Size(150 << 10)
	const ns = "default/redis"
	val := strings.Repeat("p", 100<<10)

	n := startRESPNode(t, dir, quota)
	conn, br := n.dial(t)
	if r := respCall(t, conn, br, "SET", "a", val, "RETENTION", "pinned"); r != "+OK" {
		t.Fatalf("pinned SET = %q", r)
	}
	if r := respCall(t, conn, br, "SET", "c", "x", "RETENTION", "pinned", "TTL", "3600"); r != "+OK" {
		t.Fatalf("pinned SET with a TTL = %q", r)
	}
	want := n.api.PinnedBytes()[ns]
	if want != 100<<10+1 {
		t.Fatalf("pinned bytes before the restart = %d; want %d", want, 100<<10+1)
	}
	conn.Close()
	n.close()

	n = startRESPNode(t, dir, quota)
	if got := n.api.PinnedBytes()[ns]; got != want {
		t.Fatalf("pinned bytes after the restart = %d; want %d charged again", got, want)
	}
	conn, br = n.dial(t)
	r := respCall(t, conn, br, "SET", "b", val, "RETENTION", "pinned")
	if !strings.HasPrefix(r, "-ERR RETENTION pinned") || !strings.Contains(r, "quota") {
		t.Fatalf("pinned SET over the recharged quota = %q; want -ERR naming the pin quota", r)
	}
	if r := respCall(t, conn, br, "YUEBING.RETAIN", "a", "normal"); r != ":1" {
		t.Fatalf("release after the restart = %q", r)
	}
	if got := n.api.PinnedBytes()[ns]; got != 1 {
		t.Fatalf("pinned bytes after the release = %d; want 1 (c's)", got)
	}
	if r := respCall(t, conn, br, "SET", "b", val, "RETENTION", "pinned"); r != "+OK" {
		t.Fatalf("pinned SET after the release = %q", r)
	}
}
