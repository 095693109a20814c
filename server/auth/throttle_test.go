package auth

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// clock is a hand-moved clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func testTokens(t *testing.T, opts ThrottleOptions) (*Tokens, *clock) {
	t.Helper()
	tok, err := Parse([]byte("alpha-token-0123456789: {tenant: alpha, role: tenant}\n"))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Unix(1_000_000, 0)}
	opts.Now = clk.Now
	if tok, err = tok.WithThrottle(opts); err != nil {
		t.Fatal(err)
	}
	return tok, clk
}

const good = "alpha-token-0123456789"

// TestThrottleBurstThenRate: a source may fail Failures times at once,
// then once per Interval; while refused even its right token is not
// looked at; other sources are not affected.
func TestThrottleBurstThenRate(t *testing.T) {
	tok, clk := testTokens(t, ThrottleOptions{Failures: 3, Interval: time.Second})
	ip := netip.MustParseAddr("127.0.0.1")
	other := netip.MustParseAddr("127.0.0.2")
	f := func(addr netip.Addr, token string, want error, wantRetry time.Duration) {
		t.Helper()
		_, err := tok.AuthenticateFrom(addr, token)
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("AuthenticateFrom(%v, %q) at +%v = %v, want %v", addr, token, clk.now.Unix()-1_000_000, err, want)
		}
		var te *ThrottledError
		if errors.As(err, &te) && te.RetryAfter != wantRetry {
			t.Fatalf("retry after %v, want %v", te.RetryAfter, wantRetry)
		}
	}
	for range 3 {
		f(ip, "wrong-token-0123456789", ErrUnauthenticated, 0)
	}
	f(ip, "wrong-token-0123456789", ErrThrottled, time.Second)
	f(ip, good, ErrThrottled, time.Second) // refused unseen
	f(other, good, nil, 0)
	f(other, "wrong-token-0123456789", ErrUnauthenticated, 0)
	clk.now = clk.now.Add(400 * time.Millisecond)
	f(ip, good, ErrThrottled, 600*time.Millisecond)
	clk.now = clk.now.Add(600 * time.Millisecond)
	f(ip, good, nil, 0) // successes do not count
	f(ip, good, nil, 0)
	f(ip, "wrong-token-0123456789", ErrUnauthenticated, 0)
	f(ip, "wrong-token-0123456789", ErrThrottled, time.Second)
	// A missing token guesses nothing and is not counted.
	clk.now = clk.now.Add(time.Hour)
	for range 10 {
		f(ip, "", ErrUnauthenticated, 0)
	}
	f(ip, good, nil, 0)
	if st := tok.Throttle().Stats(); st != (ThrottleStats{Failures: 5, Refused: 4, Sources: 2}) {
		t.Errorf("stats %+v", st)
	}
}

// TestThrottlePipelined: 20,000 wrong tokens from one source at one
// instant get exactly Failures looked at; the rest are refused.
func TestThrottlePipelined(t *testing.T) {
	tok, _ := testTokens(t, ThrottleOptions{})
	ip := netip.MustParseAddr("::1")
	refused := 0
	for range 20000 {
		if _, err := tok.AuthenticateFrom(ip, "wrong-token-0123456789"); errors.Is(err, ErrThrottled) {
			refused++
		}
	}
	if st := tok.Throttle().Stats(); st.Failures != 30 || refused != 20000-30 {
		t.Errorf("stats %+v, refused %d; want 30 failures and the rest refused", st, refused)
	}
}

func TestThrottleSources(t *testing.T) {
	f := func(a, b string, same bool) {
		t.Helper()
		if got := Source(netip.MustParseAddr(a)) == Source(netip.MustParseAddr(b)); got != same {
			t.Errorf("Source(%s) == Source(%s) is %v", a, b, got)
		}
	}
	f("10.0.0.1", "10.0.0.2", false)
	f("10.0.0.1", "::ffff:10.0.0.1", true)
	f("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true) // one /64, one host
	f("2001:db8:1:2::1", "2001:db8:1:3::1", false)
	f("fe80::1%eth0", "fe80::2%eth1", true)
	f("::1", "127.0.0.1", false)
}

// TestThrottleBounded: the sources remembered are bounded; the least
// recently failed is forgotten first.
func TestThrottleBounded(t *testing.T) {
	tok, _ := testTokens(t, ThrottleOptions{Failures: 1, MaxSources: 2})
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	th := tok.Throttle()
	for _, ip := range []netip.Addr{a, b, c} {
		th.Fail(ip)
	}
	if n := th.Stats().Sources; n != 2 {
		t.Fatalf("%d sources remembered, want 2", n)
	}
	if _, ok := th.Check(a); !ok {
		t.Error("the oldest source is still remembered")
	}
	if _, ok := th.Check(c); ok {
		t.Error("the newest source is forgotten")
	}
}

func TestThrottleConnDelay(t *testing.T) {
	th, err := NewThrottle(ThrottleOptions{ConnFree: 2, ConnDelay: 100 * time.Millisecond, ConnMaxDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{0, 0, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := th.ConnDelay(i + 1); got != w*time.Millisecond {
			t.Errorf("ConnDelay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := th.ConnDelay(1 << 30); got != time.Second {
		t.Errorf("ConnDelay(huge) = %v", got)
	}
}

func TestThrottleOptionsValidate(t *testing.T) {
	o := ThrottleOptions{Failures: -1, Interval: -1, MaxSources: -1, ConnFree: -1, ConnDelay: 2, ConnMaxDelay: 1}
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 5 {
		t.Errorf("%d problems reported, want 5: %v", n, err)
	}
	if _, err := NewThrottle(ThrottleOptions{}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestAuthenticateFromOff: with authentication off everyone is Open.
func TestAuthenticateFromOff(t *testing.T) {
	var tok *Tokens
	if p, err := tok.AuthenticateFrom(netip.Addr{}, "x"); err != nil || p != Open {
		t.Errorf("= %v, %v", p, err)
	}
	if tok.Throttle() != nil {
		t.Error("a throttle without tokens")
	}
}
