package resp

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/server/budget"
)

// TestTransactions: values too long to buffer per command (streamed
// outside a transaction) queue whole and run at EXEC; a transaction holds
// its queued bytes in the in-flight budget until EXEC, DISCARD or the
// connection's end, and one past MaxValueSize or the budget is refused at
// the command that overflows it, EXEC then running nothing.
func TestTransactions(t *testing.T) {
	bud, err := budget.New(budget.Options{Capacity: 4 << 20, Wait: 20 * time.Millisecond, Name: "limits.max_inflight_bytes"})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, Options{Budget: bud.User("resp"), MaxValueSize: 3 << 20})
	c := dial(t, s.addr)
	big := strings.Repeat("b", 1<<20)
	if got := c.do("MULTI"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for _, args := range [][]string{{"SET", "a", big}, {"SET", "b", "small", "EX", "100"}, {"MSET", "c", big, "d", "x"}, {"STRLEN", "a"}} {
		if got := c.do(args...); got != "+QUEUED\r\n" {
			t.Fatalf("%.20q: %q", args, got)
		}
	}
	if bud.InUse() < 2<<20 {
		t.Fatalf("a transaction of 2 MiB holds %d bytes of the budget", bud.InUse())
	}
	if got := c.do("EXEC"); got != "*4\r\n+OK\r\n+OK\r\n+OK\r\n:1048576\r\n" {
		t.Fatalf("EXEC: %q", got)
	}
	if got := c.do("MGET", "b", "d"); got != "*2\r\n$5\r\nsmall\r\n$1\r\nx\r\n" {
		t.Fatalf("after EXEC: %q", got)
	}
	if got := c.do("TTL", "b"); got != ":100\r\n" && got != ":99\r\n" {
		t.Fatalf("TTL b: %q", got)
	}
	waitFor(t, 5*time.Second, func() bool { return bud.InUse() == 0 })

	// Over MaxValueSize: the command that overflows is refused, and EXEC
	// runs nothing.
	c.do("MULTI")
	for i := range 2 {
		if got := c.do("SET", "e", big); got != "+QUEUED\r\n" {
			t.Fatalf("SET %d: %q", i, got)
		}
	}
	if got := c.do("SET", "e", big); !strings.HasPrefix(got, "-ERR transaction of more than") {
		t.Fatalf("the third MiB: %q", got)
	}
	if got := c.do("EXEC"); got != "-EXECABORT Transaction discarded because of previous errors.\r\n" {
		t.Fatalf("EXEC: %q", got)
	}
	if got := c.do("EXISTS", "e"); got != ":0\r\n" {
		t.Fatalf("after EXECABORT: %q", got)
	}
	waitFor(t, 5*time.Second, func() bool { return bud.InUse() == 0 })

	// The budget: another connection holds most of it; the queued value
	// that does not fit is refused.
	hog, ok := bud.User("hog").TryAcquire(3 << 20)
	if !ok {
		t.Fatal("could not take the budget")
	}
	c.do("MULTI")
	if got := c.do("SET", "f", big); !strings.HasPrefix(got, "-ERR value of") {
		t.Fatalf("over the budget: %q", got)
	}
	if got := c.do("DISCARD"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	hog()

	// A connection that ends inside MULTI gives its budget back.
	d := dial(t, s.addr)
	d.do("MULTI")
	d.do("SET", "g", big)
	if bud.InUse() == 0 {
		t.Fatal("a queued value holds no budget")
	}
	d.nc.Close()
	waitFor(t, 5*time.Second, func() bool { return bud.InUse() == 0 })
	if got := c.do("EXISTS", "f", "g"); got != ":0\r\n" {
		t.Fatalf("discarded and abandoned transactions wrote: %q", got)
	}

	// Watched keys hold their bytes in the budget until EXEC.
	c.do("WATCH", "x", "y")
	if bud.InUse() == 0 {
		t.Fatal("watched keys hold no budget")
	}
	c.do("MULTI")
	if got := c.do("EXEC"); got != "*0\r\n" {
		t.Fatalf("EXEC: %q", got)
	}
	if bud.InUse() != 0 {
		t.Fatalf("budget after EXEC: %d", bud.InUse())
	}
}

// TestSetRelativesStream: SETEX, PSETEX, SETNX and GETSET stream a long
// value as SET does, with their options applied.
func TestSetRelativesStream(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	big := strings.Repeat("x", 300<<10)
	for _, st := range []struct {
		args []string
		want string
	}{
		{[]string{"SETEX", "a", "100", big}, "+OK\r\n"},
		{[]string{"PSETEX", "b", "100000", big}, "+OK\r\n"},
		{[]string{"SETNX", "a", big}, ":0\r\n"},
		{[]string{"SETNX", "c", big}, ":1\r\n"},
		{[]string{"GETSET", "c", "small"}, "$307200\r\n" + big + "\r\n"},
		{[]string{"GETSET", "c", big}, "$5\r\nsmall\r\n"},
		{[]string{"STRLEN", "c"}, ":307200\r\n"},
		{[]string{"EXISTS", "a", "b", "c"}, ":3\r\n"},
	} {
		if got := c.do(st.args...); got != st.want {
			t.Fatalf("%.24q: %.60q, want %.60q", st.args, got, st.want)
		}
	}
	for _, k := range []string{"a", "b"} {
		if got := c.do("TTL", k); got != ":100\r\n" && got != ":99\r\n" {
			t.Errorf("TTL %s: %q", k, got)
		}
	}
}

// TestIncrConcurrent: increments from many clients are never lost, and
// the key keeps its deadline.
func TestIncrConcurrent(t *testing.T) {
	s := startServer(t, Options{})
	c := dial(t, s.addr)
	c.do("SET", "n", "0", "EX", "1000")
	const clients, each = 8, 100
	var wg sync.WaitGroup
	for range clients {
		d := dial(t, s.addr)
		wg.Go(func() {
			for range each {
				if got := d.do("INCR", "n"); got[0] != ':' {
					t.Errorf("INCR: %q", got)
					return
				}
			}
		})
	}
	wg.Wait()
	if got, want := c.do("GET", "n"), strconv.Itoa(clients*each); got != "$"+strconv.Itoa(len(want))+"\r\n"+want+"\r\n" {
		t.Fatalf("GET n = %q, want %s", got, want)
	}
	if got := c.do("TTL", "n"); got != ":1000\r\n" && got != ":999\r\n" {
		t.Fatalf("TTL n = %q", got)
	}
}

// TestWatchOtherClients: another client's SET, DEL or EXPIRE of a watched
// key fails EXEC, with nothing run; an untouched watch lets it run.
func TestWatchOtherClients(t *testing.T) {
	s := startServer(t, Options{})
	a, b := dial(t, s.addr), dial(t, s.addr)
	for _, change := range [][]string{{"SET", "k", "other"}, {"DEL", "k"}, {"EXPIRE", "k", "100"}, nil} {
		a.do("SET", "k", "v")
		if got := a.do("WATCH", "k"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		if change != nil {
			b.do(change...)
		}
		a.do("MULTI")
		a.do("SET", "k", "mine")
		got := a.do("EXEC")
		if change != nil && got != "*-1\r\n" || change == nil && got != "*1\r\n+OK\r\n" {
			t.Fatalf("after %q: EXEC = %q", change, got)
		}
		if v := a.do("GET", "k"); change != nil && v == "$4\r\nmine\r\n" {
			t.Fatalf("after %q the failed transaction wrote", change)
		}
	}
}
