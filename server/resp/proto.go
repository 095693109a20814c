package resp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// Request parsing. A command is read one argument at a time, straight from
// the connection's bufio.Reader, so that memory stays bounded whatever the
// client declares:
//
//   - a multibulk count is only a number: nothing is allocated for it;
//   - an argument up to smallArg bytes is copied into the command's arena,
//     whose total is bounded by limits.maxRequest;
//   - a longer argument is not read at all: next reports its length and the
//     command either streams it (a SET value goes straight into the store)
//     or skips it, reading it through a small buffer.

const (
	// smallArg is the longest argument buffered in memory. Longer SET and
	// MSET values stream into the store; any other longer argument is
	// refused. 64 KiB is Redis's PROTO_MBULK_BIG_ARG threshold doubled:
	// small enough that buffering costs little, large enough that every
	// key, option and typical metadata value fits.
	smallArg = 64 << 10
	// maxLine bounds a protocol line (a count, an inline command), as
	// Redis's PROTO_INLINE_MAX_SIZE does. It is also the bufio size.
	maxLine = 64 << 10
	// argOverhead is what each buffered argument costs beyond its bytes.
	argOverhead = 32
	// Before AUTH, with authentication on, Redis accepts at most 10
	// arguments of at most 16 KiB each; so does this server, so that an
	// unauthenticated client cannot make it buffer much.
	unauthArgs = 10
	unauthBulk = 16 << 10
)

// limits bound what one request may make the reader hold.
type limits struct {
	maxArgs    int   // largest multibulk count
	maxBulk    int64 // longest bulk at all
	maxRequest int   // arena bytes of one command
	// unauth applies Redis's limits before AUTH, with its messages.
	unauth bool
}

// protoError is a malformed request; the message follows "Protocol error: ".
type protoError string

func (e protoError) Error() string { return "Protocol error: " + string(e) }

func (e protoError) Unwrap() error { return ErrProtocol }

// reader reads requests. It is not safe for concurrent use.
type reader struct {
	br  *bufio.Reader
	lim limits

	n         int // arguments of the current command
	remaining int // not yet read
	pending   int64
	hasBig    bool // an argument of pending bytes is announced but unread

	arena  []byte
	spans  [][2]int // offsets of the arguments read so far in arena
	args   [][]byte
	inline bool // the command came as one line, split into inl
	inl    [][2]int
}

func newReader(r io.Reader, lim limits) *reader {
	return &reader{br: bufio.NewReaderSize(r, maxLine), lim: lim}
}

// begin reads the start of the next command and returns its argument count
// (at least 1). An inline command is read whole; its arguments are then
// returned by next like those of a multibulk request.
func (r *reader) begin() (int, error) {
	r.reset()
	for {
		b, err := r.br.Peek(1)
		if err != nil {
			return 0, err
		}
		if b[0] != '*' {
			n, err := r.readInline()
			if err != nil {
				return 0, err
			}
			if n == 0 {
				r.reset()
				continue // an empty line, as Redis ignores
			}
			return n, nil
		}
		line, err := r.line()
		if err != nil {
			return 0, err
		}
		n, ok := parseInt(line[1:])
		if !ok || n > int64(r.lim.maxArgs) {
			if ok && r.lim.unauth {
				return 0, protoError("unauthenticated multibulk length")
			}
			return 0, protoError("invalid multibulk length")
		}
		if n <= 0 {
			continue // "*0" and "*-1" are empty requests
		}
		r.n, r.remaining = int(n), int(n)
		return r.n, nil
	}
}

// line reads a CRLF-terminated line and returns it without the CRLF. The
// slice is valid until the next read.
func (r *reader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, protoError("too big count string")
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, protoError("expected CRLF line ending")
	}
	return line[:len(line)-2], nil
}

// next reads the next argument. An argument of at most smallArg bytes that
// fits the arena is returned in arg, valid until the command ends; a longer
// one is not read: big is its length and the caller must stream or skip it
// before the next call. An empty argument is returned as a non-nil empty
// slice.
func (r *reader) next() (arg []byte, big int64, err error) {
	if r.hasBig {
		panic("BUG: resp: next with an unread argument pending")
	}
	if r.remaining <= 0 {
		panic("BUG: resp: next past the last argument")
	}
	r.remaining--
	if r.inline {
		s := r.inl[len(r.spans)]
		r.spans = append(r.spans, s)
		return r.arena[s[0]:s[1]:s[1]], 0, nil
	}
	line, err := r.line()
	if err != nil {
		return nil, 0, err
	}
	if len(line) == 0 || line[0] != '$' {
		c := "EOF"
		if len(line) > 0 {
			c = strconv.QuoteRune(rune(line[0]))
		}
		return nil, 0, protoError("expected '$', got " + c)
	}
	n, ok := parseInt(line[1:])
	if !ok || n < 0 || n > r.lim.maxBulk {
		if ok && n > 0 && r.lim.unauth {
			return nil, 0, protoError("unauthenticated bulk length")
		}
		return nil, 0, protoError("invalid bulk length")
	}
	if n > smallArg || len(r.arena)+int(n)+argOverhead*(len(r.spans)+1) > r.lim.maxRequest {
		r.pending, r.hasBig = n, true
		return nil, n, nil
	}
	start := len(r.arena)
	r.arena = append(r.arena, make([]byte, n+2)...)
	if _, err := io.ReadFull(r.br, r.arena[start:]); err != nil {
		return nil, 0, unexpected(err)
	}
	if r.arena[start+int(n)] != '\r' || r.arena[start+int(n)+1] != '\n' {
		return nil, 0, protoError("bulk string not terminated by CRLF")
	}
	r.arena = r.arena[:start+int(n)]
	r.spans = append(r.spans, [2]int{start, start + int(n)})
	return r.arena[start : start+int(n) : start+int(n)], 0, nil
}

// stream copies the pending long argument into w (a store writer's
// ReaderFrom reads it straight from the socket) and checks its CRLF.
func (r *reader) stream(w io.ReaderFrom) error {
	if !r.hasBig {
		panic("BUG: resp: stream without a pending argument")
	}
	n := r.pending
	r.hasBig, r.pending = false, 0
	got, err := w.ReadFrom(io.LimitReader(r.br, n))
	if err != nil {
		return unexpected(err)
	}
	if got != n {
		return io.ErrUnexpectedEOF
	}
	return r.crlf()
}

func (r *reader) crlf() error {
	var b [2]byte
	if _, err := io.ReadFull(r.br, b[:]); err != nil {
		return unexpected(err)
	}
	if b != [2]byte{'\r', '\n'} {
		return protoError("bulk string not terminated by CRLF")
	}
	return nil
}

// skip discards the pending long argument, reading it through the bufio
// buffer: no memory is allocated for it.
func (r *reader) skip() error {
	if !r.hasBig {
		return nil
	}
	n := r.pending
	r.hasBig, r.pending = false, 0
	if _, err := r.br.Discard(int(n)); err != nil {
		return unexpected(err)
	}
	return r.crlf()
}

// skipRest discards the rest of the command.
func (r *reader) skipRest() error {
	if err := r.skip(); err != nil {
		return err
	}
	if r.inline {
		r.remaining = 0
		return nil
	}
	for r.remaining > 0 {
		r.remaining--
		line, err := r.line()
		if err != nil {
			return err
		}
		if len(line) == 0 || line[0] != '$' {
			return protoError("expected '$'")
		}
		n, ok := parseInt(line[1:])
		if !ok || n < 0 || n > r.lim.maxBulk {
			return protoError("invalid bulk length")
		}
		r.pending, r.hasBig = n, true
		if err := r.skip(); err != nil {
			return err
		}
	}
	return nil
}

// rest reads the remaining arguments into r.args (after those already
// read). If any is too long to buffer it is skipped and tooLong is set;
// the command must then be refused.
func (r *reader) rest() (args [][]byte, tooLong bool, err error) {
	if err := r.skip(); err != nil {
		return nil, false, err
	}
	for r.remaining > 0 {
		_, big, err := r.next()
		if err != nil {
			return nil, false, err
		}
		if big > 0 || r.hasBig {
			tooLong = true
			if err := r.skip(); err != nil {
				return nil, false, err
			}
		}
	}
	if tooLong {
		return nil, true, nil
	}
	return r.all(), false, nil
}

// all returns every argument buffered so far.
func (r *reader) all() [][]byte {
	r.args = r.args[:0]
	for _, s := range r.spans {
		r.args = append(r.args, r.arena[s[0]:s[1]:s[1]])
	}
	return r.args
}

// forget drops the arguments buffered so far (MSET, between pairs), so a
// long command needs no more memory than one pair. Inline commands keep
// theirs: they were read whole.
func (r *reader) forget() {
	if r.inline {
		return
	}
	r.arena = r.arena[:0]
	r.spans = r.spans[:0]
}

// reset ends the current command. An arena grown for a large command is
// dropped so that idle connections hold little memory.
func (r *reader) reset() {
	if cap(r.arena) > 4*smallArg {
		r.arena = nil
	}
	r.arena = r.arena[:0]
	r.spans = r.spans[:0]
	r.args = r.args[:0]
	r.inl = r.inl[:0]
	r.inline = false
	r.n, r.remaining, r.pending, r.hasBig = 0, 0, 0, false
}

// readInline reads a command in the inline form ("SET k v\r\n"), splitting it
// as redis-cli quotes arguments.
func (r *reader) readInline() (int, error) {
	line, err := r.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return 0, protoError("too big inline request")
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return 0, io.ErrUnexpectedEOF
		}
		return 0, err
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
	r.arena = append(r.arena[:0], line...)
	inl, ok := splitArgs(r.arena, r.inl[:0])
	if !ok {
		return 0, protoError("unbalanced quotes in request")
	}
	if len(inl) > r.lim.maxArgs {
		return 0, protoError("invalid multibulk length")
	}
	r.inl, r.inline = inl, true
	r.n, r.remaining = len(inl), len(inl)
	return len(inl), nil
}

// splitArgs splits an inline command into arguments in place and returns
// their offsets: words separated by spaces, "double quoted" with backslash
// escapes (\n, \r, \t, \b, \a, \xHH, and \ before any other byte) or
// 'single quoted' (only \' escaped). A closing quote must be followed by a
// space or the end of the line. It is Redis's sdssplitargs.
func splitArgs(line []byte, spans [][2]int) ([][2]int, bool) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return spans, true
		}
		// Unquoting only ever shrinks an argument, so it is rewritten in
		// place: w never passes i.
		start, w := i, i
		inq, insq := false, false
	word:
		for ; ; i++ {
			if i == len(line) {
				if inq || insq {
					return nil, false
				}
				break
			}
			c := line[i]
			switch {
			case inq:
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					c = unhex(line[i+2])<<4 | unhex(line[i+3])
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					switch c = line[i]; c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
				case c == '"':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, false
					}
					i++
					break word
				}
			case insq:
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					c = '\''
					i++
				case c == '\'':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, false
					}
					i++
					break word
				}
			case isSpace(c):
				break word
			case c == '"':
				inq = true
				continue
			case c == '\'':
				insq = true
				continue
			}
			line[w] = c
			w++
		}
		spans = append(spans, [2]int{start, w})
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// parseInt parses a decimal integer strictly: an optional '-', then 1 to 19
// digits, no leading '+', spaces or other bytes. It is used for protocol
// counts and for integer arguments alike.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true // -(1<<63) wraps to itself: MinInt64
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
