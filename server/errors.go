package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
)

var (
	// ErrBadRequest: a malformed parameter, header or body.
	ErrBadRequest = errors.New("server: bad request")
	// ErrBadJSON: a request body that is not the JSON the endpoint takes.
	ErrBadJSON = errors.New("server: malformed JSON")
	// ErrNotFound: no such block, object, context or route, or one the
	// caller may not see.
	ErrNotFound = errors.New("server: not found")
	// ErrConflict: the key is stored under another namespace or name.
	ErrConflict = errors.New("server: conflict")
	// ErrTooLarge: a body, block or batch over its limit.
	ErrTooLarge = errors.New("server: request too large")
	// ErrLengthRequired: a block PUT whose size is not declared.
	ErrLengthRequired = errors.New("server: length required")
	// ErrRange: a Range header that cannot be satisfied.
	ErrRange = errors.New("server: range not satisfiable")
	// ErrOverloaded: the in-flight memory budget or context limit is used
	// up; retry later.
	ErrOverloaded = errors.New("server: overloaded")
	// ErrUnavailable: the server is shutting down or timed out.
	ErrUnavailable = errors.New("server: unavailable")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("server: invalid config")
)

// apiError is the one mapping from an error to an HTTP status and a stable
// machine-readable code. Every handler reports failures through it, so a
// given cause always gets the same answer.
func apiError(err error) (status int, code string) {
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized, "unauthenticated"
	case errors.Is(err, auth.ErrForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, block.ErrInvalidKey):
		return http.StatusBadRequest, "invalid_key"
	case errors.Is(err, block.ErrInvalidNamespace):
		return http.StatusBadRequest, "invalid_namespace"
	case errors.Is(err, block.ErrInvalidBlockSize):
		return http.StatusBadRequest, "invalid_block_size"
	case errors.Is(err, block.ErrInvalidToken):
		return http.StatusBadRequest, "invalid_token"
	case errors.Is(err, ErrBadJSON):
		return http.StatusBadRequest, "invalid_json"
	case errors.Is(err, ErrBadRequest), errors.Is(err, tier.ErrMeta):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, tier.ErrSize):
		return http.StatusBadRequest, "size_mismatch"
	case errors.Is(err, ErrNoCluster):
		return http.StatusNotFound, "no_cluster"
	case errors.Is(err, cluster.ErrBadRequest):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrNotLeader):
		return http.StatusServiceUnavailable, "no_leader"
	case errors.Is(err, cluster.ErrUnreachable):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, cluster.ErrBusy):
		return http.StatusTooManyRequests, "overloaded"
	case errors.Is(err, ErrNotFound), errors.Is(err, tier.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, tier.ErrCorrupt):
		// The copy failed verification and was dropped: the block is gone,
		// and saying so is more useful than a bare 404.
		return http.StatusNotFound, "corrupt_dropped"
	case errors.Is(err, ErrConflict), errors.Is(err, tier.ErrExists):
		return http.StatusConflict, "conflict"
	case errors.Is(err, ErrLengthRequired):
		return http.StatusLengthRequired, "length_required"
	case errors.Is(err, ErrTooLarge), errors.Is(err, tier.ErrTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, ErrRange):
		return http.StatusRequestedRangeNotSatisfiable, "invalid_range"
	case errors.Is(err, tier.ErrChecksum):
		return http.StatusUnprocessableEntity, "checksum_mismatch"
	case errors.Is(err, ErrOverloaded):
		return http.StatusTooManyRequests, "overloaded"
	case errors.Is(err, tier.ErrNoSpace):
		return http.StatusInsufficientStorage, "no_space"
	case errors.Is(err, ErrUnavailable), errors.Is(err, tier.ErrClosed):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "timeout"
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
		return 499, "canceled"
	default:
		return http.StatusInternalServerError, "internal"
	}
}

// errorBody is the JSON body of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
