//go:build !linux

package rawsock

import (
	"errors"
	"net"
)

// Reader is not used where raw reads are not implemented: NewReader
// returns nil and callers read the net.Conn.
type Reader struct{}

// NewReader returns nil: read c itself.
func NewReader(c net.Conn) *Reader { return nil }

// Read is never reached: NewReader returns nil here.
func (r *Reader) Read(p []byte) (int, error) {
	return 0, errors.New("rawsock: no raw reads on this platform")
}

// Reset does nothing.
func (r *Reader) Reset() {}

// Writer is not used where raw writes are not implemented: NewWriter
// returns nil and callers write the net.Conn.
type Writer struct{}

// NewWriter returns nil: write c itself.
func NewWriter(c net.Conn) *Writer { return nil }

// Write is never reached: NewWriter returns nil here.
func (w *Writer) Write(p []byte) (int, error) {
	return 0, errors.New("rawsock: no raw writes on this platform")
}

// Writev is never reached: NewWriter returns nil here.
func (w *Writer) Writev(bufs [][]byte) (int64, error) {
	return 0, errors.New("rawsock: no raw writes on this platform")
}
