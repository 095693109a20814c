package staging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/yuebing/yuebing/internal/bytesize"
)

// Options configure a Server. The YAML names are those of the server
// configuration's shm section; fields without one are set by programs only.
type Options struct {
	// Listen is the unix socket: a path, or "@name" for an abstract
	// socket (no file; gone with the process). Required.
	Listen string `yaml:"listen"`
	// MaxSessionBytes is the largest segment one session may ask for.
	// Default 256 MiB.
	MaxSessionBytes bytesize.Size `yaml:"max_session_bytes"`
	// MaxBytes bounds the segments of all open sessions together.
	// Default 1 GiB.
	MaxBytes bytesize.Size `yaml:"max_bytes"`
	// MaxSessions bounds open sessions. Default 64.
	MaxSessions int `yaml:"max_sessions"`
	// MaxOwnerSessions bounds the open sessions of one owner, so one
	// principal cannot take every session and leave the others
	// "overloaded". Default MaxSessions/4 (at least 1): four owners at
	// their quota fill the server.
	MaxOwnerSessions int `yaml:"max_sessions_per_tenant"`
	// MaxOwnerBytes bounds the segments of one owner's sessions together.
	// Default MaxBytes/2, but at least MaxSessionBytes.
	MaxOwnerBytes bytesize.Size `yaml:"max_bytes_per_tenant"`
	// MaxPending bounds connections accepted whose request has not
	// arrived yet. Past it the oldest of them is answered "overloaded"
	// and closed, so connections that never speak hold a bounded number
	// of descriptors and cannot lock out a client that does. Default 128.
	MaxPending int `yaml:"max_pending"`
	// HelloTimeout bounds how long a connection may take to send its
	// request; a client on the same host sends it at once. Default 5s.
	HelloTimeout time.Duration `yaml:"hello_timeout"`
	// Authenticate maps a bearer token to the session's owner and a value
	// kept with the session (Session.Value: who the caller is); an error
	// refuses the session. Default: every token is accepted, owner "".
	Authenticate func(token string) (owner string, value any, err error) `yaml:"-"`
	// Handle, when set, answers requests sent on the session's socket
	// after the descriptor, one line each, with one line each (without
	// its newline). The session is held (its segment mapped) while it
	// runs. Without it the client may send nothing more.
	Handle func(ctx context.Context, s *Session, line []byte) []byte `yaml:"-"`
	// MaxRegions bounds the client buffers one session may register
	// (region.go). Default 64.
	MaxRegions int `yaml:"-"`
	// MaxRegionBytes bounds the registered regions of all sessions
	// together: the server maps them, and a copy into a page the client
	// has not touched yet allocates it here. Default 64 GiB.
	MaxRegionBytes bytesize.Size `yaml:"max_region_bytes"`
	// MaxRequestBytes bounds one request line. Default 8 MiB.
	MaxRequestBytes int `yaml:"-"`
	// Logger. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.MaxSessionBytes == 0 {
		o.MaxSessionBytes = 256 << 20
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 1 << 30
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = 64
	}
	if o.MaxOwnerSessions == 0 {
		o.MaxOwnerSessions = max(1, o.MaxSessions/4)
	}
	if o.MaxOwnerBytes == 0 {
		o.MaxOwnerBytes = max(o.MaxSessionBytes, o.MaxBytes/2)
	}
	if o.MaxPending == 0 {
		o.MaxPending = 128
	}
	if o.HelloTimeout == 0 {
		o.HelloTimeout = 5 * time.Second
	}
	if o.Authenticate == nil {
		o.Authenticate = func(string) (string, any, error) { return "", nil, nil }
	}
	if o.MaxRegions == 0 {
		o.MaxRegions = 64
	}
	if o.MaxRegionBytes == 0 {
		o.MaxRegionBytes = 64 << 30
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = 8 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	if o.Listen == "" {
		errs = append(errs, errors.New("staging: Listen is required"))
	}
	if o.MaxSessionBytes <= 0 || o.MaxBytes <= 0 || o.MaxSessions <= 0 {
		errs = append(errs, fmt.Errorf("staging: limits must be positive: session %d bytes, total %d bytes, %d sessions", o.MaxSessionBytes, o.MaxBytes, o.MaxSessions))
	}
	if o.MaxOwnerSessions <= 0 || o.MaxOwnerBytes <= 0 || o.MaxPending <= 0 || o.HelloTimeout <= 0 {
		errs = append(errs, fmt.Errorf("staging: limits must be positive: %d sessions and %d bytes per owner, %d pending connections, hello timeout %v", o.MaxOwnerSessions, o.MaxOwnerBytes, o.MaxPending, o.HelloTimeout))
	}
	if o.MaxRegions <= 0 || o.MaxRegionBytes <= 0 {
		errs = append(errs, fmt.Errorf("staging: region limits must be positive: %d regions a session, %d bytes", o.MaxRegions, o.MaxRegionBytes))
	}
	if o.MaxSessionBytes > o.MaxBytes {
		errs = append(errs, fmt.Errorf("staging: MaxSessionBytes %d exceeds MaxBytes %d", o.MaxSessionBytes, o.MaxBytes))
	}
	return errors.Join(errs...)
}
