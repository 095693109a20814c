package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/yuebing/yuebing/block"
)

// Sink receives what a Subscriber learns. Apply is called from the
// subscriber's goroutine, one update at a time in stream order; it must
// not block for long, since events queue behind it.
type Sink interface {
	Apply(u Update)
}

// Options configures a Subscriber.
type Options struct {
	// Engine names the engine in updates and logs. Required.
	Engine string
	// Endpoint is the engine's PUB socket, "tcp://host:port", dialled.
	// Required. A host of "*" (or 0.0.0.0, [::]) makes the subscriber
	// bind there instead, for an engine that connects (vLLM with an
	// endpoint naming the subscriber's host).
	Endpoint string
	// Replay is the engine's replay (ROUTER) socket; empty means the
	// engine has none, and a gap resets the engine's view.
	Replay string
	// Topic filters messages by topic prefix. Default: "" (all), as vLLM
	// publishes by default.
	Topic string
	// Namespace and BlockSize key the engine's blocks. Required. The
	// engine's events state its block size: one of another size makes the
	// subscriber key with the engine's (logged once, counted in
	// Stats.OtherBlockSize; Update.BlockSize says which).
	Namespace string
	BlockSize int
	// MaxBlocks bounds the engine hashes tracked. Default: 1<<20, more
	// blocks than any accelerator's memory holds at 16 tokens a block.
	MaxBlocks int
	// MaxReplay bounds the batches one replay may return. Default: 10000,
	// vLLM's replay buffer.
	MaxReplay int
	// MaxReplayBytes bounds the payload bytes one replay holds before they
	// are applied; past it the replay fails (and the view resets). Default:
	// 256 MiB.
	MaxReplayBytes int64
	// Frames bound one message from the engine, live or replayed, checked
	// before anything is allocated for it; a peer that sends more is
	// dropped. Default: DefaultFrameLimits (16 MiB a message). With a
	// stalled consumer the subscriber holds at most (10 + MaxPeers + 1)
	// messages: ZMQ's queue, one being read per connection, one applied;
	// with the defaults 27 x 16 MiB (432 MiB) bound, 12 x 16 MiB (192 MiB)
	// dialled, plus a 64 KiB read buffer per connection. TCP holds back
	// the rest at the peer.
	Frames FrameLimits
	// MaxPeers bounds the connections a bound endpoint ("tcp://*:P")
	// holds at once, handshakes included; more are closed as they arrive.
	// Default: 16.
	MaxPeers int
	// HandshakeTimeout bounds a connection's ZMTP handshake; a peer that
	// has not finished it by then is dropped. Default: 5 s.
	HandshakeTimeout time.Duration
	// Limits bound one batch's contents.
	Limits Limits
	// Sink receives updates. Required.
	Sink Sink
	// RetryInterval is the wait between connection attempts. Default: 200 ms.
	RetryInterval time.Duration
	// ReplayTimeout bounds one replay request. Default: 5 s.
	ReplayTimeout time.Duration
	// ReplayBackoff is how long gaps reset the view at once, without
	// asking, after a replay failed: the live stream waits while a replay
	// runs, so an engine whose replay socket hangs would otherwise stall
	// its stream ReplayTimeout for every gap. It doubles with each failure
	// up to 64 times this, and a replay that succeeds ends it. Default: 1 s.
	ReplayBackoff time.Duration
	// Stats counts what the subscriber sees. Default: a Stats of its own.
	Stats *Stats
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock for lag and the replay backoff. Default: time.Now.
	Now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	o.Limits.EnsureDefaults()
	if o.MaxBlocks == 0 {
		o.MaxBlocks = 1 << 20
	}
	if o.MaxReplay == 0 {
		o.MaxReplay = 10000
	}
	if o.MaxReplayBytes == 0 {
		o.MaxReplayBytes = 256 << 20
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = 200 * time.Millisecond
	}
	if o.ReplayTimeout == 0 {
		o.ReplayTimeout = 5 * time.Second
	}
	if o.ReplayBackoff == 0 {
		o.ReplayBackoff = time.Second
	}
	if o.Frames == (FrameLimits{}) {
		o.Frames = DefaultFrameLimits()
	}
	if o.MaxPeers == 0 {
		o.MaxPeers = 16
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.Stats == nil {
		o.Stats = new(Stats)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Engine == "" {
		errs = append(errs, fmt.Errorf("%w: empty engine name", ErrOptions))
	}
	if !strings.HasPrefix(o.Endpoint, "tcp://") {
		errs = append(errs, fmt.Errorf("%w: endpoint %q, want tcp://host:port", ErrOptions, o.Endpoint))
	}
	if o.Replay != "" && !strings.HasPrefix(o.Replay, "tcp://") {
		errs = append(errs, fmt.Errorf("%w: replay endpoint %q, want tcp://host:port", ErrOptions, o.Replay))
	}
	if err := block.ValidateNamespace(o.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrOptions, err))
	}
	if err := block.ValidateBlockSize(o.BlockSize); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrOptions, err))
	}
	if o.Sink == nil {
		errs = append(errs, fmt.Errorf("%w: no sink", ErrOptions))
	}
	if o.MaxBlocks < 1 || o.MaxReplay < 1 || o.MaxReplayBytes < 1 || o.RetryInterval <= 0 || o.ReplayTimeout <= 0 || o.ReplayBackoff <= 0 {
		errs = append(errs, fmt.Errorf("%w: max blocks, max replay (batches and bytes), retry interval, replay timeout and backoff must be positive", ErrOptions))
	}
	if !o.Frames.valid() || o.MaxPeers < 1 || o.HandshakeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: frame limits (a message at least a frame), max peers and handshake timeout must be positive", ErrOptions))
	}
	if o.Limits.MaxEvents < 1 || o.Limits.MaxHashes < 1 || o.Limits.MaxTokens < 1 {
		errs = append(errs, fmt.Errorf("%w: limits must be positive", ErrOptions))
	}
	return errors.Join(errs...)
}

// Subscriber follows one engine's KV event stream. Create one with
// NewSubscriber and call Run; Run reconnects until its context ends.
type Subscriber struct {
	opts   Options
	mapper *Mapper
	stats  *Stats
	log    *slog.Logger
	last   int64 // sequence number of the last batch applied; -1 before the first
	// lastSum is a hash of that batch's payload: the engine's replay of
	// it tells whether the engine is still the process that sent it.
	lastSum   uint64
	sumSeed   maphash.Seed
	connected atomic.Bool
	dials     int
	// replayAt is when a replay may be tried again after one failed, and
	// replayWait the backoff that set it (ReplayBackoff).
	replayAt   time.Time
	replayWait time.Duration
	// resync asks for the view to start over from the engine's replay
	// at the next batch (Resync).
	resync atomic.Bool
	// loggedSize is the last block size logged as disagreeing with
	// Options.BlockSize, so each is logged once.
	loggedSize int
}

// NewSubscriber validates opts and returns a Subscriber.
func NewSubscriber(opts Options) (*Subscriber, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m, err := NewMapper(opts.Namespace, opts.BlockSize, opts.MaxBlocks, opts.Stats)
	if err != nil {
		return nil, err
	}
	return &Subscriber{
		opts:    opts,
		mapper:  m,
		stats:   opts.Stats,
		log:     opts.Logger.With("engine", opts.Engine, "endpoint", opts.Endpoint),
		last:    -1,
		sumSeed: maphash.MakeSeed(),
	}, nil
}

// zlog routes the ZMQ library's own log lines to debug: it reports
// connections that drop, which the subscriber handles and logs itself.
func (s *Subscriber) zlog() zmq4.Option {
	return zmq4.WithLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelDebug))
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() *Stats { return s.stats }

// Connected reports whether the subscriber holds a connection to the
// engine's PUB socket.
func (s *Subscriber) Connected() bool { return s.connected.Load() }

// Run connects to the engine and applies its events until ctx ends, then
// returns ctx's error. A lost connection is redialled every RetryInterval.
func (s *Subscriber) Run(ctx context.Context) error {
	for {
		err := s.session(ctx)
		s.connected.Store(false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("kvevents: connection lost; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.opts.RetryInterval):
		}
	}
}

// guard is the transport's configuration for this subscriber's sockets:
// peers of the given ZMQ socket types, frames within Options.Frames.
func (s *Subscriber) guard(handshake time.Duration, peerTypes ...string) guardConfig {
	return guardConfig{lim: s.opts.Frames, peerTypes: peerTypes, handshake: handshake, maxConns: s.opts.MaxPeers, stats: s.stats, log: s.log}
}

// session runs one connection: dial, then receive until it fails.
func (s *Subscriber) session(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gctx := withGuard(sctx, s.guard(s.opts.HandshakeTimeout, string(zmq4.Pub), string(zmq4.XPub)))
	sub := zmq4.NewSub(gctx, zmq4.WithDialerRetry(s.opts.RetryInterval), zmq4.WithDialerMaxRetries(-1), s.zlog())
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, s.opts.Topic); err != nil {
		return err
	}
	addr, bound := bindAddr(s.opts.Endpoint)
	if !bound {
		addr = s.opts.Endpoint
	}
	ep, err := guardedEndpoint(addr)
	if err != nil {
		return err
	}
	if bound {
		// The engine connects to us (vLLM's endpoint without "*"): every
		// publisher that connects feeds this one engine's stream.
		if err := sub.Listen(ep); err != nil {
			return err
		}
	} else if err := sub.Dial(ep); err != nil {
		return err
	}
	if s.dials++; s.dials > 1 {
		s.stats.Reconnects.Add(1)
	}
	s.connected.Store(true)
	for {
		msg, err := sub.Recv()
		if err != nil {
			if bound && sctx.Err() == nil {
				// One peer's connection failed (and is gone); the others,
				// the engine's among them, go on.
				s.log.Debug("kvevents: a publisher's connection ended", "err", err)
				continue
			}
			return err
		}
		s.handle(ctx, msg.Frames)
	}
}

// bindAddr reports whether endpoint asks the subscriber to bind, as vLLM
// reads an endpoint: a host of "*" (or an unspecified address) binds,
// anything else connects. It returns the address to listen on.
func bindAddr(endpoint string) (string, bool) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", false
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", false
	}
	if host == "*" {
		return "tcp://" + net.JoinHostPort("0.0.0.0", port), true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return endpoint, true
	}
	return "", false
}

// Resync makes the engine's view start over at its next batch: reset, then
// the engine's replay from its first batch (as a subscriber joining late
// learns the cache), then the batch. The router calls it when an engine
// that was down answers again, whose old view may be wrong. It is safe to
// call from any goroutine.
func (s *Subscriber) Resync() { s.resync.Store(true) }

// handle applies one live message: [topic, seq, payload].
func (s *Subscriber) handle(ctx context.Context, frames [][]byte) {
	if len(frames) != 3 || len(frames[1]) != 8 {
		s.stats.Malformed.Add(1)
		s.log.Warn("kvevents: skipping a message that is not [topic, 8-byte sequence, payload]", "frames", len(frames))
		return
	}
	seq := int64(binary.BigEndian.Uint64(frames[1]))
	if seq < 0 {
		s.stats.Malformed.Add(1)
		s.log.Warn("kvevents: skipping a message with a negative sequence number", "seq", seq)
		return
	}
	u := Update{Engine: s.opts.Engine}
	if s.resync.Swap(false) {
		// Joining afresh: the replay up to seq is the engine's history.
		s.mapper.Reset()
		u.Reset = true
		s.last = -1
	}
	if s.last >= 0 && seq <= s.last {
		// vLLM numbers batches from 0 each time it starts: going back means
		// a new process whose cache is empty.
		s.stats.Restarts.Add(1)
		s.log.Info("kvevents: engine restarted", "seq", seq, "last", s.last)
		s.mapper.Reset()
		u.Reset = true
		s.last = -1
	}
	if seq > s.last+1 {
		s.fill(ctx, seq, &u)
	}
	s.apply(seq, frames[2], &u, true)
	s.applied(seq, frames[2])
	s.emit(&u)
}

// applied records seq, whose payload was just applied, as the last batch.
func (s *Subscriber) applied(seq int64, payload []byte) {
	s.last, s.lastSum = seq, maphash.Bytes(s.sumSeed, payload)
}

// fill recovers the batches before seq that were not received, through
// the replay socket. Joining a stream late (the first batch seen is not
// 0) is not a gap, but the replay still brings the engine's history.
//
// The replay starts at the last batch applied, not after it: an engine
// that restarted while the subscriber was away numbers its batches from 0
// again, and once past the old number only its copy of that batch, with
// other contents, shows it is another process. The view then starts over
// from the new process's history.
func (s *Subscriber) fill(ctx context.Context, seq int64, u *Update) {
	from := s.last + 1
	joining := s.last < 0
	if !joining {
		s.stats.Gaps.Add(1)
	}
	if s.opts.Replay == "" {
		if !joining {
			s.lost(u, "no replay socket", from, seq)
		}
		return
	}
	if now := s.opts.Now(); now.Before(s.replayAt) {
		if !joining {
			s.lost(u, "the replay socket failed a moment ago", from, seq)
		}
		return
	}
	ask := from
	if !joining {
		ask = s.last
	}
	frames, err := s.replay(ctx, ask, seq)
	if err != nil {
		s.replayWait = min(max(2*s.replayWait, s.opts.ReplayBackoff), 64*s.opts.ReplayBackoff)
		s.replayAt = s.opts.Now().Add(s.replayWait)
		if !joining {
			s.lost(u, err.Error(), from, seq)
		}
		return
	}
	s.replayWait = 0
	if !joining && len(frames) > 0 && frames[0].seq == s.last {
		if maphash.Bytes(s.sumSeed, frames[0].payload) != s.lastSum {
			s.stats.Restarts.Add(1)
			s.log.Info("kvevents: engine restarted while the subscriber was away", "seq", seq, "last", s.last)
			s.mapper.Reset()
			u.Reset = true
			u.Changes = u.Changes[:0]
			s.last = -1
			if frames, err = s.replay(ctx, 0, seq); err != nil {
				return // joining afresh: what cannot be replayed is not known
			}
			for _, f := range frames {
				s.stats.Replayed.Add(1)
				s.apply(f.seq, f.payload, u, false)
				s.applied(f.seq, f.payload)
			}
			return
		}
		frames = frames[1:]
	}
	if len(frames) == 0 || frames[0].seq != from {
		if !joining {
			s.lost(u, "the replay buffer no longer holds the missing batches", from, seq)
		}
	}
	for _, f := range frames {
		s.stats.Replayed.Add(1)
		s.apply(f.seq, f.payload, u, false)
		s.applied(f.seq, f.payload)
	}
}

// lost resets the engine's view after events were lost for good: a
// missed BlockRemoved would otherwise leave blocks the engine no longer
// holds in the view, and the router would send requests after them.
func (s *Subscriber) lost(u *Update, why string, from, to int64) {
	s.stats.Unrecovered.Add(1)
	s.log.Warn("kvevents: events lost; resetting the engine's view", "why", why, "from", from, "to", to)
	s.mapper.Reset()
	u.Reset = true
	u.Changes = u.Changes[:0]
}

func (s *Subscriber) apply(seq int64, payload []byte, u *Update, live bool) {
	b, err := DecodeBatch(payload, s.opts.Limits)
	if err != nil {
		// What the batch removed is unknown, and a view that keeps blocks
		// the engine dropped sends requests after them: start over.
		s.stats.Malformed.Add(1)
		s.log.Warn("kvevents: skipping a malformed batch", "seq", seq, "err", err)
		s.lost(u, "a malformed batch", seq, seq+1)
		return
	}
	s.stats.Batches.Add(1)
	s.stats.UnknownEvents.Add(int64(b.Unknown))
	if live && b.TS > 0 {
		lag := s.opts.Now().Sub(time.Unix(0, int64(b.TS*1e9)))
		s.stats.LagNanos.Store(int64(lag))
	}
	s.mapper.Apply(b, u)
	if bs := s.mapper.BlockSize(); bs != s.opts.BlockSize && bs != s.loggedSize {
		s.loggedSize = bs
		s.log.Warn("kvevents: the engine's blocks are not of the configured size; keying them with the engine's",
			"engine", s.opts.Engine, "engine_block_size", bs, "configured_block_size", s.opts.BlockSize)
	}
}

func (s *Subscriber) emit(u *Update) {
	if u.Reset || len(u.Changes) > 0 {
		s.opts.Sink.Apply(*u)
	}
}

type replayed struct {
	seq     int64
	payload []byte
}

// replay asks the engine's replay socket for the batches from from on and
// returns those before to, in order. vLLM's ROUTER answers a request
// [start seq] with one [seq, payload] message per buffered batch and an end
// marker [-1, ""]. A DEALER speaks to it the way a REQ would (an empty
// delimiter frame first) without REQ's one-reply rule.
func (s *Subscriber) replay(ctx context.Context, from, to int64) ([]replayed, error) {
	rctx, cancel := context.WithTimeout(ctx, s.opts.ReplayTimeout)
	defer cancel()
	// The handshake is not bound by the context: give it the replay's time.
	gctx := withGuard(rctx, s.guard(min(s.opts.HandshakeTimeout, s.opts.ReplayTimeout), string(zmq4.Router)))
	d := zmq4.NewDealer(gctx, zmq4.WithDialerRetry(s.opts.RetryInterval), zmq4.WithDialerMaxRetries(3), s.zlog())
	defer d.Close()
	ep, err := guardedEndpoint(s.opts.Replay)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReplay, err)
	}
	if err := d.Dial(ep); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReplay, err)
	}
	var start [8]byte
	binary.BigEndian.PutUint64(start[:], uint64(from))
	if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, start[:])); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReplay, err)
	}
	var (
		out   []replayed
		bytes int64
	)
	for n := 0; ; n++ {
		msg, err := d.Recv()
		if err != nil {
			return nil, fmt.Errorf("%w: after %d batches: %w", ErrReplay, len(out), err)
		}
		f := msg.Frames
		if len(f) > 0 && len(f[0]) == 0 {
			f = f[1:] // the delimiter
		}
		if len(f) != 2 || len(f[0]) != 8 {
			return nil, fmt.Errorf("%w: a reply of %d frames, want [seq, payload]", ErrReplay, len(f))
		}
		seq := int64(binary.BigEndian.Uint64(f[0]))
		if seq == -1 {
			return out, nil
		}
		if n >= s.opts.MaxReplay {
			return nil, fmt.Errorf("%w: more than %d batches", ErrReplay, s.opts.MaxReplay)
		}
		if seq < from || seq >= to {
			continue // before the request (a bad reply) or already live
		}
		if bytes += int64(len(f[1])); bytes > s.opts.MaxReplayBytes {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrReplay, s.opts.MaxReplayBytes)
		}
		if len(out) > 0 && seq <= out[len(out)-1].seq {
			return nil, fmt.Errorf("%w: sequence %d after %d", ErrReplay, seq, out[len(out)-1].seq)
		}
		out = append(out, replayed{seq: seq, payload: f[1]})
	}
}
