package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuebing/yuebing/internal/rawsock"
)

// Block and object puts over HTTP/1.1 are served on a connection the node
// takes over from net/http, so that a put costs no goroutine hand-off.
//
// net/http starts a goroutine for every request whose body it has read to
// the end (to notice a client that goes away) and stops it again after the
// answer; on a small VM those wake-ups cost a 1 MiB put more than copying
// its bytes (docs/benchmarks.md, "Socket-path puts without hand-offs").
// A put connection instead reads each request's head itself, reads the
// body straight into the store, and writes the answer in one write, all
// on the goroutine net/http gave the first put. The first request that is
// not a put goes back to net/http, with the bytes already read, through a
// listener of handed-back connections served by the same http.Server.

// putConnDrain bounds the unread body the node reads and drops to keep a
// connection after an answer given early (net/http's own bound); a larger
// remainder closes the connection instead.
const putConnDrain = 256 << 10

// putConns serves the put connections of one http.Server.
type putConns struct {
	srv           *http.Server
	next          http.Handler
	back          *handback
	idleTimeout   time.Duration
	headerTimeout time.Duration
	maxHeader     int64

	mu struct {
		sync.Mutex
		// conns maps each connection served here to whether it is busy
		// with a request.
		conns    map[net.Conn]bool
		draining bool
	}
	wg sync.WaitGroup
}

// newPutConns installs the put fast path in srv: PUT /v1/blocks/ and
// /v1/objects/ on a kept-alive HTTP/1.1 connection are then served without
// net/http's per-request goroutines. Serve srv with serve, stop it with
// shutdown or close (which also stop the put connections).
func newPutConns(srv *http.Server) *putConns {
	p := &putConns{
		srv:           srv,
		next:          srv.Handler,
		back:          newHandback(),
		idleTimeout:   srv.IdleTimeout,
		headerTimeout: srv.ReadHeaderTimeout,
		maxHeader:     int64(srv.MaxHeaderBytes),
	}
	if p.idleTimeout == 0 {
		p.idleTimeout = srv.ReadTimeout
	}
	if p.maxHeader <= 0 {
		p.maxHeader = http.DefaultMaxHeaderBytes
	}
	p.mu.conns = make(map[net.Conn]bool)
	srv.Handler = p
	return p
}

// serve serves the server on ln, and the connections handed back to
// net/http; it returns what srv.Serve(ln) returns.
func (p *putConns) serve(ln net.Listener) error {
	p.back.setAddr(ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- p.srv.Serve(p.back) }()
	err := p.srv.Serve(ln)
	p.back.Close()
	<-errc
	return err
}

// shutdown shuts the server down gracefully, then closes the idle put
// connections, lets busy ones finish their request, and waits for them
// until ctx ends.
func (p *putConns) shutdown(ctx context.Context) error {
	err := p.srv.Shutdown(ctx)
	p.mu.Lock()
	p.mu.draining = true
	for c, busy := range p.mu.conns {
		if !busy {
			// Wakes the loop from its wait for the next request.
			c.SetReadDeadline(aLongTimeAgo)
		}
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("server: put connections still busy: %w", ctx.Err()))
	}
}

// close closes the server and every put connection at once.
func (p *putConns) close() error {
	err := p.srv.Close()
	p.mu.Lock()
	p.mu.draining = true
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	return err
}

var aLongTimeAgo = time.Unix(1, 0)

// isPutLine reports whether an HTTP request line is a block or object put
// of HTTP/1.1.
func isPutLine(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("PUT /v1/"))
	if !ok || !(bytes.HasPrefix(rest, []byte("blocks/")) || bytes.HasPrefix(rest, []byte("objects/"))) {
		return false
	}
	return bytes.HasSuffix(bytes.TrimRight(line, "\r\n"), []byte(" HTTP/1.1"))
}

// eligible reports whether net/http's request r may start a put
// connection: a put of a body of known length with nothing for net/http
// to do on the way (no 100-continue, no TLS, no chunks).
func eligible(r *http.Request) bool {
	return r.Method == http.MethodPut && r.ProtoMajor == 1 && r.ProtoMinor == 1 && r.TLS == nil &&
		r.ContentLength > 0 && len(r.TransferEncoding) == 0 && !r.Close &&
		r.Header.Get("Expect") == "" &&
		(strings.HasPrefix(r.URL.Path, "/v1/blocks/") || strings.HasPrefix(r.URL.Path, "/v1/objects/"))
}

func (p *putConns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !eligible(r) {
		p.next.ServeHTTP(w, r)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.next.ServeHTTP(w, r)
		return
	}
	// The bytes net/http read past the head are the body's first.
	b, _ := brw.Reader.Peek(brw.Reader.Buffered())
	pre := bytes.Clone(b)
	if hc, ok := conn.(*prefixConn); ok {
		// A connection handed back before: take the socket itself again,
		// with what the loop had read ahead that net/http has not (it
		// follows what net/http buffered), or every later put would read
		// and write through the wrapper, past the raw calls.
		pre = append(pre, hc.pre...)
		conn = hc.Conn
	}
	cr := &putConnReader{conn: conn, raw: rawsock.NewReader(conn), pre: pre, remain: math.MaxInt64}
	pc := &putConn{p: p, conn: conn, cr: cr, br: bufio.NewReaderSize(cr, 4<<10), sw: rawsock.NewWriter(conn), base: r.Context()}
	if !p.add(conn) {
		conn.Close()
		return
	}
	defer p.remove(conn)
	// Not net/http's body: reading that to its end would start net/http's
	// background read on a connection it no longer owns.
	r.Body = &putBody{r: pc.br, left: r.ContentLength}
	if !pc.serve(r) {
		conn.Close()
		return
	}
	pc.loop()
}

func (p *putConns) add(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.draining {
		return false
	}
	p.mu.conns[c] = true
	p.wg.Add(1)
	return true
}

func (p *putConns) remove(c net.Conn) {
	p.mu.Lock()
	delete(p.mu.conns, c)
	p.mu.Unlock()
	p.wg.Done()
}

// setBusy records whether c is in a request; it reports false once the
// server drains, when an idle connection must close.
func (p *putConns) setBusy(c net.Conn, busy bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.draining {
		return false
	}
	p.mu.conns[c] = busy
	return true
}

// putConn is one connection served by putConns.
type putConn struct {
	p    *putConns
	conn net.Conn
	cr   *putConnReader
	br   *bufio.Reader
	// sw writes the answers past the runtime's blocking-call bookkeeping,
	// as cr.raw reads the requests; nil where the connection has no raw
	// socket.
	sw   *rawsock.Writer
	base context.Context
	w    putWriter
	out  []byte
}

// loop serves the connection's requests until one is not a put (handed
// back to net/http), the peer closes, or the server drains.
func (pc *putConn) loop() {
	for {
		if !pc.p.setBusy(pc.conn, false) {
			pc.conn.Close()
			return
		}
		if pc.p.idleTimeout > 0 {
			pc.conn.SetReadDeadline(time.Now().Add(pc.p.idleTimeout))
		} else {
			pc.conn.SetReadDeadline(time.Time{})
		}
		line, err := pc.peekLine()
		if err != nil || !pc.p.setBusy(pc.conn, true) {
			pc.conn.Close()
			return
		}
		if !isPutLine(line) {
			pc.handBack()
			return
		}
		if pc.p.headerTimeout > 0 {
			pc.conn.SetReadDeadline(time.Now().Add(pc.p.headerTimeout))
		}
		pc.cr.remain = pc.p.maxHeader + 4<<10 // the head, and bufio's read past it
		req, err := http.ReadRequest(pc.br)
		tooLong := pc.cr.remain <= 0
		pc.cr.remain = math.MaxInt64
		pc.conn.SetReadDeadline(time.Time{})
		if err != nil {
			pc.badHead(err, tooLong)
			return
		}
		if req.ContentLength < 0 && len(req.TransferEncoding) == 0 {
			req.ContentLength = 0
		}
		switch e := req.Header.Get("Expect"); {
		case e == "":
		case strings.EqualFold(e, "100-continue"):
			if err := pc.write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
				pc.conn.Close()
				return
			}
		default:
			pc.fail(http.StatusExpectationFailed, "unsupported Expect header")
			return
		}
		req.RemoteAddr = pc.conn.RemoteAddr().String()
		req.Body = &putBody{r: req.Body, left: -1}
		if !pc.serve(req) {
			pc.conn.Close()
			return
		}
	}
}

// peekLine waits for the next request's first line without consuming it,
// so that a request that is not a put can be handed back whole.
func (pc *putConn) peekLine() ([]byte, error) {
	for n := 1; ; n = pc.br.Buffered() + 1 {
		if n > pc.br.Size() {
			// Not a put line: net/http answers a line this long.
			b, _ := pc.br.Peek(pc.br.Buffered())
			return b, nil
		}
		if _, err := pc.br.Peek(n); err != nil {
			return nil, err
		}
		b, _ := pc.br.Peek(pc.br.Buffered())
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return b[:i+1], nil
		}
	}
}

// serve runs the handler for req and writes its answer in one write. It
// reports whether the connection can carry another request.
func (pc *putConn) serve(req *http.Request) bool {
	ctx, cancel := context.WithCancel(pc.base)
	defer cancel()
	req = req.WithContext(ctx)
	pc.w.reset()
	pc.p.next.ServeHTTP(&pc.w, req)
	body := req.Body.(*putBody)
	keep := !req.Close && !body.failed
	if keep && !body.eof {
		// An answer given before the body was read: drop a short rest,
		// close the connection rather than read a long one.
		n, err := io.Copy(io.Discard, io.LimitReader(body, putConnDrain+1))
		keep = err == nil && n <= putConnDrain && body.eof
	}
	pc.out = pc.w.appendResponse(pc.out[:0], !keep)
	if err := pc.write(pc.out); err != nil {
		return false
	}
	if !keep && !body.eof && !body.failed {
		// Let the client read the answer before it sees a reset for the
		// body it is still sending (net/http does the same).
		if cw, ok := pc.conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
			pc.conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			io.Copy(io.Discard, io.LimitReader(pc.cr, 64<<20))
		}
	}
	return keep
}

// handBack gives the connection, with what was read of it, to net/http.
func (pc *putConn) handBack() {
	pc.p.setBusy(pc.conn, false)
	if pc.cr.raw != nil {
		pc.cr.raw.Reset() // net/http reads heads of a few bytes
	}
	b, _ := pc.br.Peek(pc.br.Buffered())
	pre := append(bytes.Clone(b), pc.cr.pre...)
	pc.conn.SetReadDeadline(time.Time{})
	if !pc.p.back.give(&prefixConn{Conn: pc.conn, pre: pre}) {
		pc.conn.Close()
	}
}

func (pc *putConn) badHead(err error, tooLong bool) {
	var ne net.Error
	switch {
	case tooLong:
		pc.fail(http.StatusRequestHeaderFieldsTooLarge, "request head too large")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &ne):
		pc.conn.Close() // the peer went away or stalled
	default:
		pc.fail(http.StatusBadRequest, "malformed request head")
	}
}

// fail answers a request the loop could not hand to the API, and closes.
func (pc *putConn) fail(status int, msg string) {
	pc.w.reset()
	pc.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	pc.w.WriteHeader(status)
	io.WriteString(&pc.w, msg+"\n")
	pc.write(pc.w.appendResponse(nil, true))
	pc.conn.Close()
}

// write writes b whole to the connection. Through net.Conn every write
// enters the runtime as a call that may block (entersyscall), which on a
// node idle between puts wakes sysmon into 20 µs polling after each
// answer; the raw writev does not (docs/benchmarks.md, "Raw socket writes
// and the put connection").
func (pc *putConn) write(b []byte) error {
	var err error
	if pc.sw != nil {
		_, err = pc.sw.Write(b)
	} else {
		_, err = pc.conn.Write(b)
	}
	return err
}

// putConnReader reads the connection after the bytes read ahead of it,
// and ends (EOF) once remain bytes have been read, which bounds a head.
type putConnReader struct {
	conn net.Conn
	// raw reads the socket past the runtime's blocking-call hand-offs and
	// raises its low-water mark while a body streams in; nil where the
	// connection has no raw socket.
	raw    *rawsock.Reader
	pre    []byte
	remain int64
}

func (r *putConnReader) Read(p []byte) (int, error) {
	if r.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	var n int
	var err error
	if len(r.pre) > 0 {
		n = copy(p, r.pre)
		r.pre = r.pre[n:]
	} else if r.raw != nil {
		n, err = r.raw.Read(p)
	} else {
		n, err = r.conn.Read(p)
	}
	r.remain -= int64(n)
	return n, err
}

// putBody is a request body that records how its reading ended. With
// left >= 0 it is the next left bytes of r (a body of known length read
// straight from the connection), else all of r.
type putBody struct {
	r      io.Reader
	left   int64
	eof    bool
	failed bool
}

func (b *putBody) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.failed {
		return 0, io.ErrUnexpectedEOF
	}
	if b.left == 0 {
		b.eof = true
		return 0, io.EOF
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
		switch {
		case b.left == 0 && (err == nil || err == io.EOF):
			err = io.EOF
		case err == io.EOF:
			// The peer stopped before the declared length.
			err = io.ErrUnexpectedEOF
		}
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.failed = true
	}
	return n, err
}

func (b *putBody) Close() error { return nil }

// putWriter buffers an answer, to send it in one write with its length.
type putWriter struct {
	h      http.Header
	status int
	body   []byte
}

var _ http.Flusher = (*putWriter)(nil)

func (w *putWriter) reset() {
	w.h = make(http.Header, 4)
	w.status = 0
	w.body = w.body[:0]
}

func (w *putWriter) Header() http.Header { return w.h }

func (w *putWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

func (w *putWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}

// Flush does nothing: the answer leaves whole when the handler returns.
func (w *putWriter) Flush() {}

func (w *putWriter) appendResponse(b []byte, close bool) []byte {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\n"...)
	w.h.Del("Content-Length")
	w.h.Del("Transfer-Encoding")
	w.h.Del("Connection")
	if w.h.Get("Content-Type") == "" && len(w.body) > 0 {
		w.h.Set("Content-Type", http.DetectContentType(w.body))
	}
	w.h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	bb := bytes.NewBuffer(b)
	w.h.Write(bb)
	b = bb.Bytes()
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(w.body)), 10)
	b = append(b, "\r\n"...)
	if close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, w.body...)
}

// prefixConn is a connection handed back to net/http: its reads return
// the bytes the put loop had read ahead first.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// handback is the listener through which put connections return to
// net/http.
type handback struct {
	mu    sync.Mutex
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newHandback() *handback {
	return &handback{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (h *handback) setAddr(a net.Addr) {
	h.mu.Lock()
	h.addr = a
	h.mu.Unlock()
}

func (h *handback) give(c net.Conn) bool {
	select {
	case h.conns <- c:
		return true
	case <-h.done:
		return false
	}
}

func (h *handback) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handback) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *handback) Addr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}
