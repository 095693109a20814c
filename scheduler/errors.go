package scheduler

import "errors"

var (
	// ErrOptions reports options that cannot work; the message says which.
	ErrOptions = errors.New("scheduler: invalid options")
	// ErrProfile reports a profile (CSV of measurements) that cannot be
	// parsed or fitted; the message names the line or the problem.
	ErrProfile = errors.New("scheduler: invalid profile")
	// ErrUnknownInstance reports an instance id that is not registered.
	ErrUnknownInstance = errors.New("scheduler: unknown instance")
	// ErrInstance reports an invalid instance registration.
	ErrInstance = errors.New("scheduler: invalid instance")
	// ErrDuplicate reports a registration or request id already in use.
	ErrDuplicate = errors.New("scheduler: duplicate id")
	// ErrTooManyInstances reports a registration past MaxInstances.
	ErrTooManyInstances = errors.New("scheduler: too many instances")
	// ErrNoPrefill reports a schedule call with no prefill instance registered.
	ErrNoPrefill = errors.New("scheduler: no prefill instance")
	// ErrRequest reports an invalid request to schedule.
	ErrRequest = errors.New("scheduler: invalid request")
	// ErrUnknownRequest reports an event for a request the core does not track.
	ErrUnknownRequest = errors.New("scheduler: unknown request")
)
