package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// PublisherOptions configures a Publisher.
type PublisherOptions struct {
	// Endpoint is the PUB socket to bind, "tcp://host:port"; port 0 picks
	// a free one. Required.
	Endpoint string
	// Replay is the replay ROUTER socket to bind; empty means none.
	Replay string
	// Topic is sent as every message's first frame. Default "" (vLLM's).
	Topic string
	// Buffer is how many past batches the replay socket can resend.
	// Default: 10000 (vLLM's buffer_steps).
	Buffer int
	// DPRank is the data-parallel rank stamped on batches. Default 0.
	DPRank int
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock of batch timestamps. Default: time.Now.
	Now func() time.Time
}

// Publisher publishes KV event batches the way vLLM's ZmqEventPublisher
// does: [topic, 8-byte big-endian sequence, msgpack batch] on a PUB socket,
// sequence numbers from 0, and a ROUTER socket that answers a request
// [start sequence] with [seq, payload] per buffered batch from there and an
// end marker [-1, ""]. An engine simulator publishes through it. It is safe
// for concurrent use.
type Publisher struct {
	opts   PublisherOptions
	ctx    context.Context
	cancel context.CancelFunc
	pub    zmq4.Socket
	router zmq4.Socket
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		seq uint64
		buf [][]byte // payloads of seqs [seq-len(buf), seq)
		enc []byte
	}
}

// NewPublisher binds the sockets and starts serving replays.
func NewPublisher(opts PublisherOptions) (*Publisher, error) {
	if opts.Buffer == 0 {
		opts.Buffer = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var errs []error
	if !strings.HasPrefix(opts.Endpoint, "tcp://") {
		errs = append(errs, fmt.Errorf("%w: endpoint %q, want tcp://host:port", ErrOptions, opts.Endpoint))
	}
	if opts.Replay != "" && !strings.HasPrefix(opts.Replay, "tcp://") {
		errs = append(errs, fmt.Errorf("%w: replay endpoint %q, want tcp://host:port", ErrOptions, opts.Replay))
	}
	if opts.Buffer < 1 || opts.DPRank < 0 {
		errs = append(errs, fmt.Errorf("%w: buffer %d and rank %d", ErrOptions, opts.Buffer, opts.DPRank))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The library logs peers that hang up mid-handshake; that is routine
	// for a publisher, so it goes to debug.
	zlog := zmq4.WithLogger(slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug))
	// Subscribers send the publisher subscriptions and replay requests,
	// a few bytes each: their frames are bounded as tightly.
	small := FrameLimits{MaxFrameBytes: 4 << 10, MaxMessageBytes: 4 << 10, MaxFrames: 4}
	guard := func(peerTypes ...zmq4.SocketType) context.Context {
		cfg := defaultGuard
		cfg.lim, cfg.log = small, opts.Logger
		for _, t := range peerTypes {
			cfg.peerTypes = append(cfg.peerTypes, string(t))
		}
		return withGuard(ctx, cfg)
	}
	ep, err := guardedEndpoint(opts.Endpoint)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	p := &Publisher{opts: opts, ctx: ctx, cancel: cancel, pub: zmq4.NewPub(guard(zmq4.Sub, zmq4.XSub), zlog)}
	if err := p.pub.Listen(ep); err != nil {
		cancel()
		p.pub.Close()
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	if opts.Replay != "" {
		p.router = zmq4.NewRouter(guard(zmq4.Dealer, zmq4.Req, zmq4.Router), zmq4.WithID(zmq4.SocketIdentity("kvevents-replay")), zlog)
		rep, err := guardedEndpoint(opts.Replay)
		if err == nil {
			err = p.router.Listen(rep)
		}
		if err != nil {
			cancel()
			p.pub.Close()
			p.router.Close()
			return nil, fmt.Errorf("kvevents: publisher replay: %w", err)
		}
		p.wg.Go(p.serveReplay)
	}
	return p, nil
}

// Endpoint returns the bound PUB endpoint, "tcp://host:port".
func (p *Publisher) Endpoint() string { return "tcp://" + p.pub.Addr().String() }

// ReplayEndpoint returns the bound replay endpoint, or "" without one.
func (p *Publisher) ReplayEndpoint() string {
	if p.router == nil {
		return ""
	}
	return "tcp://" + p.router.Addr().String()
}

// Publish sends events as one batch stamped with the current time.
func (p *Publisher) Publish(events []Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := Batch{TS: float64(p.opts.Now().UnixNano()) / 1e9, Events: events, DPRank: p.opts.DPRank}
	enc, err := AppendBatch(p.mu.enc[:0], b)
	if err != nil {
		return err
	}
	payload := append([]byte(nil), enc...)
	p.mu.enc = enc
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], p.mu.seq)
	if err := p.pub.SendMulti(zmq4.NewMsgFrom([]byte(p.opts.Topic), seq[:], payload)); err != nil {
		return fmt.Errorf("kvevents: publish: %w", err)
	}
	p.mu.seq++
	if len(p.mu.buf) == p.opts.Buffer {
		p.mu.buf[0] = nil
		p.mu.buf = p.mu.buf[1:]
	}
	p.mu.buf = append(p.mu.buf, payload)
	return nil
}

// serveReplay answers replay requests until the publisher closes.
func (p *Publisher) serveReplay() {
	for {
		msg, err := p.router.Recv()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			continue
		}
		f := msg.Frames
		if len(f) != 3 || len(f[2]) != 8 {
			p.opts.Logger.Warn("kvevents: invalid replay request", "frames", len(f))
			continue
		}
		id, start := f[0], binary.BigEndian.Uint64(f[2])
		p.mu.Lock()
		first := p.mu.seq - uint64(len(p.mu.buf))
		var out [][2][]byte
		for i, payload := range p.mu.buf {
			if s := first + uint64(i); s >= start {
				var seq [8]byte
				binary.BigEndian.PutUint64(seq[:], s)
				out = append(out, [2][]byte{seq[:], payload})
			}
		}
		p.mu.Unlock()
		for _, o := range out {
			if err := p.router.SendMulti(zmq4.NewMsgFrom(id, []byte{}, o[0], o[1])); err != nil {
				break
			}
		}
		end := make([]byte, 8)
		binary.BigEndian.PutUint64(end, ^uint64(0)) // -1
		p.router.SendMulti(zmq4.NewMsgFrom(id, []byte{}, end, []byte{}))
	}
}

// Close stops the publisher and closes its sockets.
func (p *Publisher) Close() error {
	p.cancel()
	err := p.pub.Close()
	if p.router != nil {
		err = errors.Join(err, p.router.Close())
	}
	p.wg.Wait()
	return err
}
