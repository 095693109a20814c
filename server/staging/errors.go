package staging

import "errors"

var (
	// ErrNoSession: no open session has this ID for this owner.
	ErrNoSession = errors.New("staging: no such session")
	// ErrLimit: the session would exceed MaxSessionBytes, MaxBytes or
	// MaxSessions.
	ErrLimit = errors.New("staging: shared-memory limit reached")
	// ErrQuota: the session would exceed its owner's MaxOwnerSessions or
	// MaxOwnerBytes.
	ErrQuota = errors.New("staging: quota of this principal reached")
	// ErrBusy: MaxPending newer connections are waiting to send their
	// request; this one was closed to make room.
	ErrBusy = errors.New("staging: too many connections waiting")
	// ErrHelloTimeout: the client sent no request within HelloTimeout.
	ErrHelloTimeout = errors.New("staging: no session request in time")
	// ErrBadHello: the client's first line is not a valid request.
	ErrBadHello = errors.New("staging: bad session request")
	// ErrBadRegion: a register request's descriptor or size cannot be
	// mapped safely, or an unregister names no region.
	ErrBadRegion = errors.New("staging: bad region")
	// ErrClosed: the server is shut down.
	ErrClosed = errors.New("staging: closed")
)
