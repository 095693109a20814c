package resp

import (
	"regexp"
	"slices"
	"strconv"
	"testing"
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
