package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// respConn is a minimal RESP2 client for the soak: SET and GET over one
// connection, enough to drive the Redis front end without a client
// library. It is not safe for concurrent use.
type respConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// maxRESPBulk bounds a bulk reply: no soak value is larger, and a damaged
// length must not allocate gigabytes.
const maxRESPBulk = 64 << 20

// respError is an error reply ("-ERR ...").
type respError struct{ msg string }

func (e *respError) Error() string { return "resp: " + e.msg }

func dialRESP(ctx context.Context, addr string) (*respConn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (rc *respConn) Close() error { return rc.c.Close() }

func (rc *respConn) send(timeout time.Duration, args ...[]byte) error {
	rc.c.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(rc.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(rc.w, "$%d\r\n", len(a))
		rc.w.Write(a)
		rc.w.WriteString("\r\n")
	}
	return rc.w.Flush()
}

// reply reads one reply: a simple string, an error (as *respError), or a
// bulk string (nil for a null bulk).
func (rc *respConn) reply() (simple string, bulk []byte, err error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", nil, errors.New("resp: empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil, nil
	case '-':
		return "", nil, &respError{line[1:]}
	case ':':
		return line[1:], nil, nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", nil, fmt.Errorf("resp: bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil, nil
		}
		if n > maxRESPBulk {
			return "", nil, fmt.Errorf("resp: bulk of %d bytes, more than the %d a soak value can be", n, maxRESPBulk)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, b); err != nil {
			return "", nil, err
		}
		return "", b[:n], nil
	}
	return "", nil, fmt.Errorf("resp: unexpected reply %q", line)
}

// Set stores value under key; nil means the server answered +OK.
func (rc *respConn) Set(key string, value []byte) error {
	if err := rc.send(30*time.Second, []byte("SET"), []byte(key), value); err != nil {
		return err
	}
	s, _, err := rc.reply()
	if err == nil && s != "OK" {
		err = fmt.Errorf("resp: SET answered %q", s)
	}
	return err
}

// Get reads key: nil bytes and nil error for a miss.
func (rc *respConn) Get(key string) ([]byte, error) {
	if err := rc.send(30*time.Second, []byte("GET"), []byte(key)); err != nil {
		return nil, err
	}
	s, b, err := rc.reply()
	if err == nil && b == nil && s != "" {
		err = fmt.Errorf("resp: GET answered %q", s)
	}
	return b, err
}
