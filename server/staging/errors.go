package staging

import "errors"

var (
	// ErrNoSession: no open session has this ID for this owner.
	ErrNoSession = errors.New("staging: no such session")
	// ErrLimit: the session would exceed MaxSessionBytes, MaxBytes or
	// MaxSessions.
	ErrLimit = errors.New("staging: shared-memory limit reached")
	// ErrBadHello: the client's first line is not a valid request.
	ErrBadHello = errors.New("staging: bad session request")
	// ErrClosed: the server is shut down.
	ErrClosed = errors.New("staging: closed")
)
