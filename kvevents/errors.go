package kvevents

import "errors"

var (
	// ErrOptions reports options that cannot work; the message says which.
	ErrOptions = errors.New("kvevents: invalid options")
	// ErrMalformed reports a message or payload that is not a vLLM event
	// batch; the message says what is wrong with it.
	ErrMalformed = errors.New("kvevents: malformed event batch")
	// ErrReplay reports a replay request the engine did not answer in full.
	ErrReplay = errors.New("kvevents: replay failed")
)

var (
	// ErrFrame reports bytes from a ZMQ peer that break ZMTP framing; the
	// connection is dropped.
	ErrFrame = errors.New("kvevents: malformed ZMTP frame")
	// ErrFrameTooLarge reports a ZMQ frame or message over FrameLimits;
	// the connection is dropped before anything is allocated for it.
	ErrFrameTooLarge = errors.New("kvevents: ZMTP frame over the limit")
)
