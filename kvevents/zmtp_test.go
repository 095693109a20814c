package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/index"
)

// zmtpGreeting is a ZMTP 3.0 greeting with the NULL mechanism.
func zmtpGreeting() []byte {
	g := make([]byte, zmtpGreetingLen)
	g[0], g[9], g[10], g[11] = 0xFF, 0x7F, 3, 0
	copy(g[12:], "NULL")
	return g
}

// zmtpFrame encodes one frame; long sizes use the 8-byte form.
func zmtpFrame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		h := make([]byte, 9)
		h[0] = flags | zmtpFlagLong
		binary.BigEndian.PutUint64(h[1:], uint64(len(body)))
		return append(h, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// zmtpReady is a READY command announcing socketType.
func zmtpReady(socketType string) []byte {
	b := []byte{5}
	b = append(b, "READY"...)
	b = append(b, 11)
	b = append(b, "Socket-Type"...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(socketType)))
	b = append(b, socketType...)
	return zmtpFrame(zmtpFlagCommand, b)
}

// hugeHeader is a data frame's long header claiming 2^62 bytes.
func hugeHeader() []byte {
	h := make([]byte, 9)
	h[0] = zmtpFlagLong
	binary.BigEndian.PutUint64(h[1:], 1<<62)
	return h
}

// rawPeer is a hand-written ZMQ peer on a real connection: it speaks
// ZMTP's framing byte by byte, so it can say what no library would. Its
// methods return errors rather than fail the test, since serving peers
// run on goroutines of their own.
type rawPeer struct{ c net.Conn }

// handshake sends a greeting and READY as socketType and reads the other
// side's.
func (p *rawPeer) handshake(socketType string) error {
	if err := p.send(zmtpGreeting(), zmtpReady(socketType)); err != nil {
		return err
	}
	var g [zmtpGreetingLen]byte
	if _, err := io.ReadFull(p.c, g[:]); err != nil {
		return err
	}
	_, _, err := p.frame() // READY
	return err
}

func (p *rawPeer) send(bs ...[]byte) error {
	_, err := p.c.Write(bytes.Join(bs, nil))
	return err
}

// frame reads one frame.
func (p *rawPeer) frame() (byte, []byte, error) {
	var h [9]byte
	if _, err := io.ReadFull(p.c, h[:2]); err != nil {
		return 0, nil, err
	}
	size := uint64(h[1])
	if h[0]&zmtpFlagLong != 0 {
		if _, err := io.ReadFull(p.c, h[2:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(h[1:])
	}
	if size > 1<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", size)
	}
	body := make([]byte, size)
	_, err := io.ReadFull(p.c, body)
	return h[0], body, err
}

// closed waits for the other side to close the connection; false if it
// has not within 10 s.
func (p *rawPeer) closed() bool {
	p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := p.frame(); err != nil {
			return !isTimeout(err)
		}
	}
}

// emptyBatch is a live message [topic, seq, payload] of an empty batch.
func emptyBatch(t *testing.T, seq int64) []byte {
	t.Helper()
	payload, err := AppendBatch(nil, Batch{TS: 1, DPRank: -1})
	if err != nil {
		t.Fatal(err)
	}
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], uint64(seq))
	return bytes.Join([][]byte{zmtpFrame(zmtpFlagMore, nil), zmtpFrame(zmtpFlagMore, s[:]), zmtpFrame(0, payload)}, nil)
}

// fakeEngine accepts connections on 127.0.0.1 and hands each to the next
// of serve, one connection each.
func fakeEngine(t *testing.T, serve ...func(*rawPeer)) (endpoint string, accepted func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	n := make(chan int, 1)
	n <- 0
	go func() {
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			k := <-n
			n <- k + 1
			t.Cleanup(func() { c.Close() })
			if i < len(serve) {
				go serve[i](&rawPeer{c: c})
			}
		}
	}()
	return "tcp://" + l.Addr().String(), func() int { k := <-n; n <- k; return k }
}

func newTestSubscriber(t *testing.T, o Options) *Subscriber {
	t.Helper()
	o.Engine, o.Namespace, o.BlockSize = "e0", testNS, testBS
	if o.Sink == nil {
		o.Sink = &view{blocks: map[block.Key]index.TierMask{}}
	}
	o.RetryInterval = 20 * time.Millisecond
	s, err := NewSubscriber(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Run(t.Context()); close(done) }()
	t.Cleanup(func() { <-done })
	return s
}

// TestHostileFrameHeader: a publisher that claims a frame of 2^62 bytes
// is dropped before anything is allocated for it (the ZMQ library would
// allocate it, and fail the process), and the subscriber goes on: its
// next connection to the engine carries events.
func TestHostileFrameHeader(t *testing.T) {
	dropped := make(chan bool, 1)
	batch := emptyBatch(t, 0)
	ep, _ := fakeEngine(t,
		func(p *rawPeer) {
			p.handshake("PUB")
			p.frame() // SUBSCRIBE
			p.send(hugeHeader())
			dropped <- p.closed()
		},
		func(p *rawPeer) {
			p.handshake("PUB")
			p.frame()
			// Until the subscription has reached a PUB its messages are
			// dropped: send until the connection closes.
			for p.send(batch) == nil {
				time.Sleep(10 * time.Millisecond)
			}
		})
	s := newTestSubscriber(t, Options{Endpoint: ep})
	if !<-dropped {
		t.Fatal("the subscriber kept the connection of a peer that sent a 2^62-byte frame header")
	}
	waitFor(t, "events on the next connection", func() bool { return s.Stats().Batches.Load() > 0 })
	if got := s.Stats().Rejected.Load(); got != 1 {
		t.Fatalf("rejected %d peers, want 1", got)
	}
}

// TestHostileBoundPeers: with a bound endpoint anyone on the network may
// connect. Oversized frames, READY metadata that overruns its frame, a
// peer of the wrong socket type, and silent connections past MaxPeers are
// each dropped, without ending the socket: the engine's publisher, which
// connects last, is heard.
func TestHostileBoundPeers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := newTestSubscriber(t, Options{Endpoint: fmt.Sprintf("tcp://*:%d", port), MaxPeers: 4, HandshakeTimeout: 2 * time.Second})
	dial := func() *rawPeer {
		t.Helper()
		var c net.Conn
		waitFor(t, "the subscriber to listen", func() bool {
			c, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			return err == nil
		})
		t.Cleanup(func() { c.Close() })
		return &rawPeer{c: c}
	}
	badREADY := append([]byte{5}, "READY"...)
	badREADY = append(badREADY, 3, 'a', 'b', 'c') // a name, then no room for the value's length
	attacks := map[string]func(*rawPeer){
		"2^62-byte frame": func(p *rawPeer) { p.handshake("PUB"); p.send(hugeHeader()) },
		"frame over the limit": func(p *rawPeer) {
			p.handshake("PUB")
			h := hugeHeader()
			binary.BigEndian.PutUint64(h[1:], 16<<20+1)
			p.send(h)
		},
		"message over the frame count": func(p *rawPeer) {
			p.handshake("PUB")
			for range 17 {
				p.send(zmtpFrame(zmtpFlagMore, nil))
			}
		},
		"READY overrunning its frame": func(p *rawPeer) { p.send(zmtpGreeting(), zmtpFrame(zmtpFlagCommand, badREADY)) },
		"wrong socket type":           func(p *rawPeer) { p.send(zmtpGreeting(), zmtpReady("ROUTER")) },
		"reserved flag bits":          func(p *rawPeer) { p.handshake("PUB"); p.send([]byte{0x80, 0}) },
	}
	for name, attack := range attacks {
		p := dial()
		attack(p)
		if !p.closed() {
			t.Fatalf("%s: the connection stayed open", name)
		}
	}
	// Silent peers: MaxPeers of them hold slots until the handshake times
	// out; the rest are refused at once.
	var silent []*rawPeer
	for range 6 {
		silent = append(silent, dial())
	}
	for _, p := range silent {
		if !p.closed() {
			t.Fatal("a silent peer kept its connection")
		}
	}
	pub := startPublisher(t, "--no-replay", "--connect", fmt.Sprintf("tcp://127.0.0.1:%d", port))
	pub.Prime(func() bool { return s.Stats().Batches.Load() > 0 })
	if got := s.Stats().Reconnects.Load(); got != 0 {
		t.Fatalf("the bound socket was reopened %d times; a peer's failure should end only its connection", got)
	}
	if got := s.Stats().Rejected.Load(); got < int64(len(attacks))+2 {
		t.Fatalf("rejected %d peers, want at least %d", got, len(attacks)+2)
	}
}

// TestHostileReplay: a replay socket that answers with a 2^62-byte frame
// is dropped and the gap resets the view; the next gap, within the
// backoff, resets it at once without asking (the live stream is not held
// up by a replay socket known to fail).
func TestHostileReplay(t *testing.T) {
	replayEP, replays := fakeEngine(t, func(p *rawPeer) {
		p.handshake("ROUTER")
		p.frame() // the request's delimiter
		p.send(hugeHeader())
	})
	next := make(chan []byte)
	liveEP, _ := fakeEngine(t, func(p *rawPeer) {
		p.handshake("PUB")
		p.frame()
		for m := range next {
			p.send(m)
		}
	})
	s := newTestSubscriber(t, Options{Endpoint: liveEP, Replay: replayEP, ReplayBackoff: time.Hour})
	// Batch 0 until one arrives (a PUB drops what it sends before the
	// subscription reaches it; a later first batch would be joining late,
	// which asks the replay socket too).
	for s.Stats().Batches.Load() == 0 {
		next <- emptyBatch(t, 0)
		time.Sleep(10 * time.Millisecond)
	}
	next <- emptyBatch(t, 5) // a gap: the replay answers with the huge frame
	waitFor(t, "the first gap to be given up", func() bool { return s.Stats().Unrecovered.Load() == 1 })
	next <- emptyBatch(t, 10) // a gap within the backoff
	waitFor(t, "the second gap to be given up", func() bool { return s.Stats().Unrecovered.Load() == 2 })
	close(next)
	if got := replays(); got != 1 {
		t.Fatalf("%d connections to the replay socket, want 1: the second gap should not ask", got)
	}
	if got := s.Stats().Rejected.Load(); got != 1 {
		t.Fatalf("rejected %d peers, want 1", got)
	}
}

// TestReplayBackoffEnds: gaps within the backoff after a failed replay
// reset the view without asking; once it has passed (on the subscriber's
// clock) the next gap asks again, and its failure doubles the wait.
func TestReplayBackoffEnds(t *testing.T) {
	// Each replay connection reads the request and hangs up unanswered.
	refuse := func(p *rawPeer) {
		p.handshake("ROUTER")
		p.frame()
		p.c.Close()
	}
	replayEP, replays := fakeEngine(t, refuse, refuse, refuse)
	next := make(chan []byte)
	liveEP, _ := fakeEngine(t, func(p *rawPeer) {
		p.handshake("PUB")
		p.frame()
		for m := range next {
			p.send(m)
		}
	})
	var clock atomic.Int64 // seconds past the epoch below
	epoch := time.Unix(1e9, 0)
	now := func() time.Time { return epoch.Add(time.Duration(clock.Load()) * time.Second) }
	s := newTestSubscriber(t, Options{Endpoint: liveEP, Replay: replayEP, ReplayBackoff: 10 * time.Second, Now: now})
	for s.Stats().Batches.Load() == 0 {
		next <- emptyBatch(t, 0)
		time.Sleep(10 * time.Millisecond)
	}
	seq := int64(0)
	gap := func(want int64) {
		t.Helper()
		seq += 5
		next <- emptyBatch(t, seq)
		waitFor(t, "the gap to be given up", func() bool { return s.Stats().Unrecovered.Load() == want })
	}
	steps := []struct {
		advance int64 // seconds
		asks    int   // replay connections so far
	}{
		{0, 1},  // the first gap asks, and fails: 10 s of backoff
		{9, 1},  // within it
		{2, 2},  // past it: asks, fails again: 20 s
		{19, 2}, // within the doubled wait
		{2, 3},  // past it
	}
	for i, st := range steps {
		clock.Add(st.advance)
		gap(int64(i + 1))
		if got := replays(); got != st.asks {
			t.Fatalf("step %d: %d connections to the replay socket, want %d", i, got, st.asks)
		}
	}
	close(next)
}

// FuzzZMTPGuard drives the ZMQ library's own connection code with
// arbitrary bytes from a peer, read through the guard: whatever they
// are, nothing panics, every message delivered is within the limits,
// and the bytes passed on are a prefix of those sent.
func FuzzZMTPGuard(f *testing.F) {
	hello := append(zmtpGreeting(), zmtpReady("PUB")...)
	f.Add(hello)
	f.Add(append(bytes.Clone(hello), hugeHeader()...))
	f.Add(append(bytes.Clone(hello), zmtpFrame(zmtpFlagMore, nil)...))
	f.Add(append(zmtpGreeting(), zmtpFrame(zmtpFlagCommand, append([]byte{5}, "READY\x03abc"...))...))
	f.Add(append(zmtpGreeting(), zmtpFrame(zmtpFlagCommand, []byte{9, 'R'})...))
	f.Add(append(append(bytes.Clone(hello), zmtpFrame(zmtpFlagMore, []byte("topic"))...), zmtpFrame(0, []byte("payload"))...))
	f.Add(append(bytes.Clone(hello), zmtpFrame(zmtpFlagCommand, append([]byte{4}, "PING"...))...))
	f.Add(zmtpGreeting()[:10])
	lim := FrameLimits{MaxFrameBytes: 1 << 10, MaxMessageBytes: 2 << 10, MaxFrames: 4}
	f.Fuzz(func(t *testing.T, in []byte) {
		// What the guard passes on, checked against what was sent.
		var passed bytes.Buffer
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go io.Copy(io.Discard, b)
		go func() { b.Write(in); b.Close() }()
		g := newZMTPGuard(a, lim, []string{"PUB", "XPUB"}, nil)
		c, err := zmq4.Open(&teeConn{Conn: a, r: g, passed: &passed}, null.Security(), zmq4.Sub, nil, true, nil)
		if err != nil {
			return
		}
		for {
			msg, err := c.RecvMsg()
			if err != nil {
				break
			}
			total := 0
			for _, fr := range msg.Frames {
				total += len(fr)
			}
			if len(msg.Frames) > lim.MaxFrames || total > int(lim.MaxMessageBytes) {
				t.Fatalf("a message of %d frames, %d bytes got through", len(msg.Frames), total)
			}
		}
		if !bytes.HasPrefix(in, passed.Bytes()) {
			t.Fatal("the bytes read are not a prefix of those sent")
		}
	})
}

// teeConn reads through r and keeps what it read.
type teeConn struct {
	net.Conn
	r      io.Reader
	passed *bytes.Buffer
}

func (c *teeConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.passed.Write(p[:n])
	return n, err
}

// TestGuardLimitsErrors: the errors name the limit, for logs.
func TestGuardLimitsErrors(t *testing.T) {
	in := append(append(zmtpGreeting(), zmtpReady("PUB")...), hugeHeader()...)
	g := newZMTPGuard(bytes.NewReader(in), DefaultFrameLimits(), nil, nil)
	_, err := io.ReadAll(g)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err %v, want ErrFrameTooLarge", err)
	}
}
