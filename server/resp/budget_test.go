package resp

import (
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/server/budget"
)

// TestInflightBudget: streamed values and reads of values below DRAM hold
// their size in the budget; with the budget full, a SET is refused naming
// the limit, its value is discarded and the connection stays usable, and a
// GET of a value on SSD is refused the same way.
func TestInflightBudget(t *testing.T) {
	bud, err := budget.New(budget.Options{Capacity: 1 << 20, Wait: 20 * time.Millisecond, Name: "limits.max_inflight_bytes"})
	if err != nil {
		t.Fatal(err)
	}
	// Values of 200 KiB are larger than the DRAM tier: they go to SSD.
	s := startServer(t, Options{Store: testStore(t, 128<<10, 64<<20), Budget: bud.User("resp")})
	c := dial(t, s.addr)
	val := strings.Repeat("v", 200<<10)
	if got := c.do("SET", "big", val); got != "+OK\r\n" {
		t.Fatalf("SET big = %q", got)
	}
	if got := c.do("STRLEN", "big"); got != ":204800\r\n" {
		t.Fatalf("STRLEN big = %q", got)
	}
	if got := c.do("GET", "big"); got != "$204800\r\n"+val+"\r\n" {
		t.Fatalf("GET big: %d bytes", len(got))
	}
	// A GET's charge ends once its reply is written, which the client can
	// read a moment before the server's write call returns.
	for deadline := time.Now().Add(10 * time.Second); bud.InUse() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if bud.InUse() != 0 {
		t.Fatalf("budget in use after the commands: %d", bud.InUse())
	}

	hold, ok := bud.User("http").TryAcquire(1 << 20)
	if !ok {
		t.Fatal("could not fill the budget")
	}
	got := c.do("SET", "big2", val)
	if !strings.HasPrefix(got, "-ERR value of 204800 bytes not admitted: ") || !strings.Contains(got, "limits.max_inflight_bytes") {
		t.Fatalf("SET with the budget full = %q", got)
	}
	if got := c.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after the refused SET = %q", got)
	}
	if got := c.do("EXISTS", "big2"); got != ":0\r\n" {
		t.Fatalf("EXISTS big2 = %q", got)
	}
	if got := c.do("GET", "big"); !strings.HasPrefix(got, "-ERR read of 204800 bytes not admitted: ") {
		t.Fatalf("GET of a value on SSD with the budget full = %q", got)
	}
	if got := c.do("SET", "small", "v"); got != "+OK\r\n" {
		t.Fatalf("a short value does not stream and is not charged: %q", got)
	}
	info := c.do("INFO", "memory")
	for _, want := range []string{"inflight_bytes:1048576\r\n", "inflight_capacity_bytes:1048576\r\n", "inflight_rejections:2\r\n", "inflight_waits:2\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO memory lacks %q", want)
		}
	}
	hold()
	if got := c.do("GET", "big"); got != "$204800\r\n"+val+"\r\n" {
		t.Fatalf("GET big once the budget is free: %d bytes", len(got))
	}
}
