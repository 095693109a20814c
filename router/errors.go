package router

import (
	"errors"
	"time"
)

var (
	// ErrOptions reports options that cannot work; the message says which.
	ErrOptions = errors.New("router: invalid options")
	// ErrBadRequest reports a request that is not a valid OpenAI
	// completion or chat request, or is past a limit.
	ErrBadRequest = errors.New("router: invalid request")
	// ErrModelNotFound reports a request for a model the router does not serve.
	ErrModelNotFound = errors.New("router: model not found")
	// ErrOverloaded reports a request rejected early because no engine can
	// meet its SLOs; see Overloaded for when to retry.
	ErrOverloaded = errors.New("router: overloaded")
	// ErrNoEngine reports that no engine is up to take a request.
	ErrNoEngine = errors.New("router: no engine available")
	// ErrUpstream reports an engine that failed, after the one retry.
	ErrUpstream = errors.New("router: engine failed")
	// ErrUnknownEngine reports an engine id the router was not configured
	// with: it has no address, events or probes, so it cannot be routed to.
	ErrUnknownEngine = errors.New("router: unknown engine")
)

// Overloaded is the error of an early rejection: Is(ErrOverloaded), and
// RetryAfter says when the client should try again.
type Overloaded struct {
	Reason     string
	RetryAfter time.Duration
}

func (e *Overloaded) Error() string {
	return "router: overloaded: no engine meets the " + e.Reason + "; retry later"
}

// Is makes errors.Is(err, ErrOverloaded) true.
func (e *Overloaded) Is(target error) bool { return target == ErrOverloaded }
