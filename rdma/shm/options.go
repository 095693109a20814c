package shm

import (
	"errors"
	"fmt"
	"time"
)

// DefaultSocket is the default unix socket: an abstract one (the leading
// '@'), so it needs no file and vanishes with the process.
const DefaultSocket = "@yuebing-transfer"

// Options configure a shared-memory transport. Zero fields mean their
// defaults.
type Options struct {
	// Socket is the unix socket this node answers open requests on: a
	// path, or "@name" for an abstract socket. Default DefaultSocket.
	Socket string
	// ChunkSize is how many bytes a transfer copies between checks of its
	// context and progress updates. Default 4 MiB: large enough that the
	// checks cost nothing next to the copy, small enough that a deadline
	// is honoured within about a millisecond.
	ChunkSize int
	// MaxConns bounds concurrent open connections; more are refused.
	// Default 256.
	MaxConns int
	// Timeout bounds a handshake and an open. Default 5s.
	Timeout time.Duration
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = 4 << 20
	}
	if o.MaxConns == 0 {
		o.MaxConns = 256
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	return o
}

// Validate reports every invalid field at once.
func (o *Options) Validate() error {
	var errs []error
	if o.ChunkSize <= 0 {
		errs = append(errs, fmt.Errorf("shm: ChunkSize %d must be positive", o.ChunkSize))
	}
	if o.MaxConns <= 0 {
		errs = append(errs, fmt.Errorf("shm: MaxConns %d must be positive", o.MaxConns))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("shm: Timeout %v must be positive", o.Timeout))
	}
	// sun_path holds 108 bytes including the terminating zero.
	if len(o.Socket) > 107 {
		errs = append(errs, fmt.Errorf("shm: Socket path of %d bytes, at most 107", len(o.Socket)))
	}
	return errors.Join(errs...)
}
