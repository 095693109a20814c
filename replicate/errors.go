package replicate

import "errors"

var (
	// ErrOptions reports Options out of range.
	ErrOptions = errors.New("replicate: invalid options")
	// ErrInvalidEvent reports an event the core cannot take: an unknown
	// type, a node id at or above Options.MaxNodes, a tier or count out of
	// range. The core is unchanged.
	ErrInvalidEvent = errors.New("replicate: invalid event")
	// ErrTimeout is the error an action is failed with when its Done did not
	// come within Options.ActionTimeout.
	ErrTimeout = errors.New("replicate: action timed out")
	// ErrNodeDown is the error an action is failed with when a node it
	// involves goes down.
	ErrNodeDown = errors.New("replicate: node down")
	// ErrClosed reports a call on a closed Driver.
	ErrClosed = errors.New("replicate: driver closed")
)
