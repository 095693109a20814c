package staging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Options configure a Server.
type Options struct {
	// Listen is the unix socket: a path, or "@name" for an abstract
	// socket (no file; gone with the process). Required.
	Listen string
	// MaxSessionBytes is the largest segment one session may ask for.
	// Default 256 MiB.
	MaxSessionBytes int64
	// MaxBytes bounds the segments of all open sessions together.
	// Default 1 GiB.
	MaxBytes int64
	// MaxSessions bounds open sessions. Default 64.
	MaxSessions int
	// Authenticate maps a bearer token to the session's owner and a value
	// kept with the session (Session.Value: who the caller is); an error
	// refuses the session. Default: every token is accepted, owner "".
	Authenticate func(token string) (owner string, value any, err error)
	// Handle, when set, answers requests sent on the session's socket
	// after the descriptor, one line each, with one line each (without
	// its newline). The session is held (its segment mapped) while it
	// runs. Without it the client may send nothing more.
	Handle func(ctx context.Context, s *Session, line []byte) []byte
	// MaxRequestBytes bounds one request line. Default 8 MiB.
	MaxRequestBytes int
	// Logger. Default slog.Default().
	Logger *slog.Logger
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
	if o.Authenticate == nil {
		o.Authenticate = func(string) (string, any, error) { return "", nil, nil }
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
	if o.MaxSessionBytes > o.MaxBytes {
		errs = append(errs, fmt.Errorf("staging: MaxSessionBytes %d exceeds MaxBytes %d", o.MaxSessionBytes, o.MaxBytes))
	}
	return errors.Join(errs...)
}
