package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// ThrottleOptions configures the limiter of failed authentications that
// the HTTP API and the Redis front end share through one *Tokens.
//
// Per source (an IPv4 address, or an IPv6 /64, which one host usually
// holds whole) it is a token bucket: Failures wrong tokens in a burst, then
// one per Interval. A source whose bucket is empty is refused without its
// token being checked, the right ones included: otherwise an attacker would
// keep guessing at full speed and learn which guess was right from the one
// answer that is not a refusal. Successes never count and never refill the
// bucket (a tenant's own good token must not buy guesses at an admin's).
// Loopback is a source like any other: local users are not trusted.
//
// Per connection (the Redis front end, where one connection can pipeline
// thousands of AUTHs) each failure past ConnFree is answered only after a
// delay that doubles, from ConnDelay up to ConnMaxDelay.
type ThrottleOptions struct {
	// Failures is how many failed authentications a source may make in a
	// burst before it is refused. Default 30: well above a person's typos
	// or a misconfigured client's first retries.
	Failures int
	// Interval is how often one failure of a source is forgiven: past the
	// burst a source may fail once per Interval, and a refused one is told
	// to retry after the time until then. Default 2s (1,800 guesses an
	// hour at most, against thousands a second unthrottled).
	Interval time.Duration
	// MaxSources bounds the sources remembered, least recently failed
	// forgotten first, so a spray of addresses costs bounded memory (about
	// 100 bytes each). Default 16384.
	MaxSources int
	// ConnFree is how many failures one connection may make before its
	// answers are delayed. Default 3.
	ConnFree int
	// ConnDelay is the delay of the first failure past ConnFree; each
	// further one doubles it. Default 100ms.
	ConnDelay time.Duration
	// ConnMaxDelay caps the delay. Default 5s.
	ConnMaxDelay time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// EnsureDefaults fills in zero fields.
func (o *ThrottleOptions) EnsureDefaults() {
	if o.Failures == 0 {
		o.Failures = 30
	}
	if o.Interval == 0 {
		o.Interval = 2 * time.Second
	}
	if o.MaxSources == 0 {
		o.MaxSources = 16384
	}
	if o.ConnFree == 0 {
		o.ConnFree = 3
	}
	if o.ConnDelay == 0 {
		o.ConnDelay = 100 * time.Millisecond
	}
	if o.ConnMaxDelay == 0 {
		o.ConnMaxDelay = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports every invalid field.
func (o *ThrottleOptions) Validate() error {
	var errs []error
	if o.Failures < 1 {
		errs = append(errs, fmt.Errorf("auth: throttle Failures %d must be at least 1", o.Failures))
	}
	if o.Interval <= 0 {
		errs = append(errs, fmt.Errorf("auth: throttle Interval %v must be positive", o.Interval))
	}
	if o.MaxSources < 1 {
		errs = append(errs, fmt.Errorf("auth: throttle MaxSources %d must be at least 1", o.MaxSources))
	}
	if o.ConnFree < 0 {
		errs = append(errs, fmt.Errorf("auth: throttle ConnFree %d must not be negative", o.ConnFree))
	}
	if o.ConnDelay < 0 || o.ConnMaxDelay < o.ConnDelay {
		errs = append(errs, fmt.Errorf("auth: throttle ConnDelay %v must be in [0, ConnMaxDelay %v]", o.ConnDelay, o.ConnMaxDelay))
	}
	return errors.Join(errs...)
}

// ThrottledError is the error of a source refused for its failures. It
// wraps ErrThrottled.
type ThrottledError struct {
	// RetryAfter is how long until the source may try again.
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%v: retry in %v", ErrThrottled, e.RetryAfter)
}

func (e *ThrottledError) Unwrap() error { return ErrThrottled }

// Throttle limits failed authentications per source (ThrottleOptions). It
// is a deterministic core: every decision depends only on the calls made
// and the clock. It is safe for concurrent use.
type Throttle struct {
	opts ThrottleOptions
	// slack is how far ahead of now a source's next free time may be
	// while it may still try: Failures-1 intervals.
	slack time.Duration
	// tracked is the number of sources remembered, so the common case (no
	// failure yet) takes no lock on a request's path.
	tracked atomic.Int64
	mu      struct {
		sync.RWMutex
		// Per source, the time its bucket is full again (GCRA's
		// theoretical arrival time): each failure pushes it an Interval
		// further past max(it, now).
		sources *simplelru.LRU[netip.Prefix, time.Time]
	}
	failures, refused atomic.Int64
}

// NewThrottle returns a limiter; zero fields of opts take their defaults.
func NewThrottle(opts ThrottleOptions) (*Throttle, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	th := &Throttle{opts: opts, slack: time.Duration(opts.Failures-1) * opts.Interval}
	th.mu.sources, _ = simplelru.NewLRU[netip.Prefix, time.Time](opts.MaxSources, nil) // size validated
	return th, nil
}

// Source returns the key of addr's bucket: the address, or its /64 for
// IPv6. An invalid address (a Unix socket's peer) is one source of its own.
func Source(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap()
	switch {
	case addr.Is4():
		return netip.PrefixFrom(addr, 32)
	case addr.Is6():
		p, _ := addr.WithZone("").Prefix(64)
		return p
	}
	return netip.Prefix{}
}

// Check reports whether addr may try to authenticate now, and if not, how
// long until it may. A refusal is counted.
func (th *Throttle) Check(addr netip.Addr) (retryAfter time.Duration, ok bool) {
	if th.tracked.Load() == 0 {
		return 0, true
	}
	src := Source(addr)
	th.mu.RLock()
	next, found := th.mu.sources.Peek(src)
	th.mu.RUnlock()
	if !found {
		return 0, true
	}
	if ahead := next.Sub(th.opts.Now()); ahead > th.slack {
		th.refused.Add(1)
		return ahead - th.slack, false
	}
	return 0, true
}

// Fail records a failed authentication from addr.
func (th *Throttle) Fail(addr netip.Addr) {
	th.failures.Add(1)
	src := Source(addr)
	now := th.opts.Now()
	th.mu.Lock()
	defer th.mu.Unlock()
	next, _ := th.mu.sources.Get(src)
	if next.Before(now) {
		next = now
	}
	th.mu.sources.Add(src, next.Add(th.opts.Interval))
	th.tracked.Store(int64(th.mu.sources.Len()))
}

// ConnDelay returns how long to hold the answer to a connection's n-th
// failed authentication (counting from 1).
func (th *Throttle) ConnDelay(n int) time.Duration {
	past := n - th.opts.ConnFree
	switch {
	case past <= 0:
		return 0
	case past > 32: // far past the cap; the shift would overflow
		return th.opts.ConnMaxDelay
	}
	return min(th.opts.ConnDelay<<(past-1), th.opts.ConnMaxDelay)
}

// ThrottleStats are a Throttle's counters since it was made.
type ThrottleStats struct {
	Failures int64 // failed authentications
	Refused  int64 // attempts refused without checking the token
	Sources  int   // sources remembered now
}

// Stats returns the counters.
func (th *Throttle) Stats() ThrottleStats {
	th.mu.RLock()
	n := th.mu.sources.Len()
	th.mu.RUnlock()
	return ThrottleStats{Failures: th.failures.Load(), Refused: th.refused.Load(), Sources: n}
}

func defaultThrottle() *Throttle {
	th, err := NewThrottle(ThrottleOptions{})
	if err != nil {
		panic("BUG: auth: the default throttle options are invalid: " + err.Error())
	}
	return th
}

// WithThrottle returns the same tokens with a throttle of opts of their
// own (zero fields take their defaults), for callers that tune it or test
// it with a clock of theirs.
func (t *Tokens) WithThrottle(opts ThrottleOptions) (*Tokens, error) {
	th, err := NewThrottle(opts)
	if err != nil {
		return nil, err
	}
	c := *t
	c.throttle = th
	return &c, nil
}

// Throttle returns the tokens' limiter of failures; nil when
// authentication is off.
func (t *Tokens) Throttle() *Throttle {
	if t == nil {
		return nil
	}
	return t.throttle
}

// AuthenticateFrom is Authenticate for a caller at addr, throttled: a
// source that failed too often gets a *ThrottledError (wrapping
// ErrThrottled) without its token being looked at, and a wrong token
// counts against its source. A missing token is not counted: it guesses
// nothing, and a client that forgot its token must not lock out the
// others at its address. With authentication off every caller is Open.
func (t *Tokens) AuthenticateFrom(addr netip.Addr, token string) (Principal, error) {
	if t == nil {
		return Open, nil
	}
	if token == "" {
		return Principal{}, ErrUnauthenticated
	}
	if wait, ok := t.throttle.Check(addr); !ok {
		return Principal{}, &ThrottledError{RetryAfter: wait}
	}
	p, err := t.Authenticate(token)
	if err != nil {
		t.throttle.Fail(addr)
	}
	return p, err
}
