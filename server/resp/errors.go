package resp

import "errors"

var (
	// ErrServerClosed: Serve was called after Shutdown.
	ErrServerClosed = errors.New("resp: server closed")
	// ErrProtocol: the client sent bytes that are not a RESP request, or one
	// beyond the protocol limits (a bulk longer than MaxBulkLen, a multibulk
	// count above MaxArgs). The server replies "-ERR Protocol error: ..." and
	// closes the connection, as Redis does.
	ErrProtocol = errors.New("resp: protocol error")
)
