package bench

import "errors"

var (
	// ErrTrace reports a request trace that does not follow the Mooncake
	// format; the error is a *TraceError that names the line and field.
	ErrTrace = errors.New("bench: invalid trace")
	// ErrOptions reports options that cannot run; the message says which.
	ErrOptions = errors.New("bench: invalid options")
)
