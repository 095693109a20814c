package resp

import (
	"bufio"
	"context"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuebing/yuebing/server/auth"
)

// listedIDs returns the ids of the connections a CLIENT LIST reply shows.
func listedIDs(t testing.TB, reply string) []int64 {
	t.Helper()
	var ids []int64
	for _, m := range regexp.MustCompile(`(?m)(?:^|\n)id=(\d+) `).FindAllStringSubmatch(reply, -1) {
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func clientID(t testing.TB, c *rawConn) int64 {
	t.Helper()
	got := c.do("CLIENT", "ID")
	id, err := strconv.ParseInt(got[1:len(got)-2], 10, 64)
	if err != nil {
		t.Fatalf("CLIENT ID = %q", got)
	}
	return id
}

// TestClientListTenants: with authentication on, CLIENT LIST shows a
// tenant only its own tenant's connections (their addresses, names and
// last commands are the tenant's business); an admin sees every one.
func TestClientListTenants(t *testing.T) {
	s := startServer(t, Options{Tokens: writeTokens(t, `
alpha-token-0123456789: {tenant: alpha, role: tenant}
beta-token-01234567890: {tenant: beta, role: tenant}
ops-token-012345678901: {tenant: ops, role: admin}
`)})
	a1, a2, b, o, anon := dial(t, s.addr), dial(t, s.addr), dial(t, s.addr), dial(t, s.addr), dial(t, s.addr)
	for _, l := range []struct {
		c     *rawConn
		token string
	}{{a1, "alpha-token-0123456789"}, {a2, "alpha-token-0123456789"}, {b, "beta-token-01234567890"}} {
		if got := l.c.do("AUTH", l.token); got != "+OK\r\n" {
			t.Fatalf("AUTH: %q", got)
		}
	}
	// An admin acting for alpha is still an admin, not one of alpha's.
	if got := o.do("AUTH", "alpha", "ops-token-012345678901"); got != "+OK\r\n" {
		t.Fatalf("AUTH as admin: %q", got)
	}
	ia1, ia2, ib, io := clientID(t, a1), clientID(t, a2), clientID(t, b), clientID(t, o)
	// The unauthenticated one cannot ask its id; ids are given in accept
	// order, and it was dialled last. Its NOAUTH says it is being served.
	if got := anon.do("PING"); got != "-NOAUTH Authentication required.\r\n" {
		t.Fatalf("PING before AUTH: %q", got)
	}
	ianon := io + 1

	f := func(c *rawConn, want []int64, args ...string) {
		t.Helper()
		if got := listedIDs(t, c.do(append([]string{"CLIENT", "LIST"}, args...)...)); !slices.Equal(got, want) {
			t.Errorf("CLIENT LIST %q = ids %v, want %v", args, got, want)
		}
	}
	all := []int64{ia1, ia2, ib, io, ianon}
	slices.Sort(all)
	f(a1, []int64{ia1, ia2})
	f(a2, []int64{ia1, ia2})
	f(b, []int64{ib})
	f(o, all)
	// Asking by id does not reveal another tenant's connection either.
	f(a1, nil, "ID", strconv.FormatInt(ib, 10), strconv.FormatInt(io, 10))
	f(a1, []int64{ia2}, "ID", strconv.FormatInt(ia2, 10), strconv.FormatInt(ib, 10))
	f(o, []int64{ib}, "ID", strconv.FormatInt(ib, 10))
	// RESET logs a connection out: it is no longer one of alpha's.
	if got := a2.do("RESET"); got != "+RESET\r\n" {
		t.Fatalf("RESET: %q", got)
	}
	f(a1, []int64{ia1})
	f(o, all)
}

// TestClientListOpen: without authentication every client is an admin of
// tenant "default" and sees every connection, as in Redis.
func TestClientListOpen(t *testing.T) {
	s := startServer(t, Options{})
	a, b := dial(t, s.addr), dial(t, s.addr)
	want := []int64{clientID(t, a), clientID(t, b)}
	if got := listedIDs(t, a.do("CLIENT", "LIST")); !slices.Equal(got, want) {
		t.Errorf("CLIENT LIST = ids %v, want %v", got, want)
	}
}

// delays records the connections' AUTH delays instead of sleeping them.
type delays struct {
	mu sync.Mutex
	d  []time.Duration
}

func (r *delays) sleep(d time.Duration, _ <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.d = append(r.d, d)
}

func (r *delays) get() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.d)
}

// dialFrom connects from a loopback address of its own, another source
// for the throttle.
func dialFrom(t testing.TB, local, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReaderSize(nc, 1<<16)}
}

// TestAuthThrottle: wrong AUTHs pipelined on one connection no longer run
// at thousands a second: past the first few each answer is held longer,
// and past the address's burst the address is refused without its token
// being looked at, the right one included, until its bucket refills.
// Connections already logged in, and other addresses, are unaffected. The
// clock is frozen and the delays recorded, so nothing here is timed.
func TestAuthThrottle(t *testing.T) {
	tokens, err := writeTokens(t, "alpha-token-0123456789: {tenant: alpha, role: tenant}\n").WithThrottle(auth.ThrottleOptions{
		Failures: 5, Interval: time.Minute, ConnFree: 3, ConnDelay: 100 * time.Millisecond, ConnMaxDelay: 5 * time.Second,
		Now: func() time.Time { return time.Unix(1_000_000, 0) },
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &delays{}
	s := startServer(t, Options{Tokens: tokens, sleep: rec.sleep})
	in := dialFrom(t, "127.0.0.1", s.addr)
	if got := in.do("AUTH", "alpha-token-0123456789"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}

	const n = 20
	a := dialFrom(t, "127.0.0.1", s.addr)
	a.send(strings.Repeat(multibulk("AUTH", "wrong-token-0123456789"), n))
	for i := range n {
		want := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
		if i >= 5 {
			want = "-ERR too many failed authentications from this address; retry in 60 s\r\n"
		}
		if got := a.reply(); got != want {
			t.Fatalf("AUTH %d = %q, want %q", i+1, got, want)
		}
	}
	var want []time.Duration
	for i := 4; i <= n; i++ {
		want = append(want, min(100*time.Millisecond<<(i-4), 5*time.Second))
	}
	got := rec.get()
	if !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	var total time.Duration
	for _, d := range got {
		total += d
	}
	t.Logf("%d wrong AUTHs held for %v in all", n, total)

	// The right token from the refused address is refused as well; the
	// same from another address, and a connection logged in before, work.
	if got := dialFrom(t, "127.0.0.1", s.addr).do("AUTH", "alpha-token-0123456789"); !strings.HasPrefix(got, "-ERR too many failed authentications") {
		t.Errorf("right token from the refused address: %q", got)
	}
	if got := dialFrom(t, "127.0.0.2", s.addr).do("AUTH", "alpha-token-0123456789"); got != "+OK\r\n" {
		t.Errorf("right token from another address: %q", got)
	}
	if got := in.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Errorf("SET on a connection logged in before: %q", got)
	}
	if got := in.do("INFO", "stats"); !strings.Contains(got, "acl_access_denied_auth:21\r\n") {
		t.Errorf("INFO stats: %q", got)
	}
	if st := tokens.Throttle().Stats(); st.Failures != 5 || st.Refused != n-5+1 {
		t.Errorf("throttle %+v", st)
	}
}

// TestAuthDelayShutdown: Shutdown cuts short a connection's AUTH delay.
func TestAuthDelayShutdown(t *testing.T) {
	tokens, err := writeTokens(t, "alpha-token-0123456789: {tenant: alpha, role: tenant}\n").WithThrottle(auth.ThrottleOptions{
		ConnFree: 1, ConnDelay: time.Hour, ConnMaxDelay: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := testStore(t, 16<<20, 64<<20)
	t.Cleanup(func() { st.Close() })
	held := make(chan struct{})
	s, err := NewServer(Options{Store: st, Tokens: tokens, sleep: func(d time.Duration, stop <-chan struct{}) {
		close(held)
		sleep(d, stop)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	c := dial(t, ln.Addr().String())
	c.send(strings.Repeat(multibulk("AUTH", "wrong-token-0123456789"), 2))
	if got := c.reply(); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("first AUTH: %q", got)
	}
	<-held // the second is held for an hour; Shutdown must not wait for it
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got := c.reply(); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Errorf("second AUTH: %q", got)
	}
}
