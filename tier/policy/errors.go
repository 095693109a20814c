package policy

import "errors"

var (
	// ErrUnknownPolicy reports a policy name that New does not know.
	ErrUnknownPolicy = errors.New("policy: unknown policy")
	// ErrCapacity reports a capacity New cannot size a policy for.
	ErrCapacity = errors.New("policy: capacity must be positive")
)
