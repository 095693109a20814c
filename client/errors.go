package client

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors, one per kind of failure the server reports. Test with
// errors.Is; errors.As with *Error gives the status, code and message.
var (
	ErrBadRequest      = errors.New("client: bad request")
	ErrUnauthenticated = errors.New("client: unauthenticated")
	ErrForbidden       = errors.New("client: forbidden")
	ErrNotFound        = errors.New("client: not found")
	ErrConflict        = errors.New("client: conflict")
	ErrLengthRequired  = errors.New("client: length required")
	ErrTooLarge        = errors.New("client: too large")
	ErrRange           = errors.New("client: range not satisfiable")
	// ErrChecksum: the server refused a put whose bytes do not match the
	// checksum sent with them, or bytes received do not match the
	// checksum the server sent.
	ErrChecksum    = errors.New("client: checksum mismatch")
	ErrOverloaded  = errors.New("client: server overloaded")
	ErrNoSpace     = errors.New("client: server out of space")
	ErrUnavailable = errors.New("client: server unavailable")
	ErrServer      = errors.New("client: server error")
	// ErrProtocol: the server's answer is not what the API specifies.
	ErrProtocol = errors.New("client: protocol error")
)

// Error is an error answer from the server.
type Error struct {
	StatusCode int
	// Code is the server's machine-readable code ("not_found",
	// "checksum_mismatch", ...; docs/api.md lists them).
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("client: %d %s: %s", e.StatusCode, e.Code, e.Message)
}

// Unwrap returns the sentinel for the status, so errors.Is(err,
// client.ErrNotFound) holds for a 404.
func (e *Error) Unwrap() error {
	switch e.StatusCode {
	case http.StatusBadRequest:
		return ErrBadRequest
	case http.StatusUnauthorized:
		return ErrUnauthenticated
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusLengthRequired:
		return ErrLengthRequired
	case http.StatusRequestEntityTooLarge:
		return ErrTooLarge
	case http.StatusRequestedRangeNotSatisfiable:
		return ErrRange
	case http.StatusUnprocessableEntity:
		return ErrChecksum
	case http.StatusTooManyRequests:
		return ErrOverloaded
	case http.StatusInsufficientStorage:
		return ErrNoSpace
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	if e.StatusCode >= 500 {
		return ErrServer
	}
	return ErrProtocol
}
