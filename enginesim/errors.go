package enginesim

import "errors"

var (
	// ErrInvalid reports a bad request or option.
	ErrInvalid = errors.New("enginesim: invalid")
	// ErrOverloaded reports a full waiting queue: the request is refused,
	// not queued without bound.
	ErrOverloaded = errors.New("enginesim: overloaded")
	// ErrTooLong reports a prompt whose KV cannot fit the pool even empty.
	ErrTooLong = errors.New("enginesim: prompt does not fit the KV pool")
	// ErrStopped reports an engine whose loop has ended.
	ErrStopped = errors.New("enginesim: stopped")
)
