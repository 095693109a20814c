package resp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/yuebing/yuebing/server/auth"
)

// errWrongPass is Redis's answer to a wrong password.
const errWrongPass = "WRONGPASS invalid username-password pair or user is disabled."

// authFailed counts a failed AUTH (or HELLO AUTH), holds the answer for
// the connection's delay (auth.ThrottleOptions: one connection can pipeline
// thousands of guesses, so each one past the first few waits longer) and
// returns the error to answer: Redis's WRONGPASS, or, for an address
// refused for its failures, how long until it may try again.
func (c *conn) authFailed(err error) string {
	c.authFails++
	c.s.stats.authFailures.Add(1)
	c.pause(c.s.opts.Tokens.Throttle().ConnDelay(c.authFails))
	var te *auth.ThrottledError
	if errors.As(err, &te) {
		secs := max(1, int64((te.RetryAfter+time.Second-1)/time.Second))
		return fmt.Sprintf("ERR too many failed authentications from this address; retry in %d s", secs)
	}
	return errWrongPass
}

// pause sends the replies so far and waits d, or until Shutdown begins.
func (c *conn) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	if c.flush() != nil {
		return
	}
	c.s.opts.sleep(d, c.s.stopping)
}

// sleep is the default Options.sleep.
func sleep(d time.Duration, stop <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}

// peerAddr is the address a connection's failed AUTHs count against; the
// zero Addr (one source of its own) for a peer without an IP address.
func peerAddr(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
