package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
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

// TestRESPRetentionPinQuota runs the RESP front end over a real API, as
// a node wires them: SET ... RETENTION pinned is charged against the
// namespace's retention.pinned_quota, a SET over it stores nothing, and
// YUEBING.RETAIN ... normal gives the charge back.
func TestRESPRetentionPinQuota(t *testing.T) {
	dir := t.TempDir()
	store := newTestStore(t, dir, 4<<20)
	quota := bytesize.Size(150 << 10)
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rs.Shutdown(ctx)
		api.Close()
		store.Close()
	})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
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
