package server

import (
	"errors"
	"net/http"

	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/internal/httperr"
	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server/auth"
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
	// ErrURITooLong: a request line over maxHeaderBytes.
	ErrURITooLong = errors.New("server: request URI too long")
	// ErrHeadersTooLarge: a request line and header fields over
	// maxHeaderBytes together.
	ErrHeadersTooLarge = errors.New("server: request header fields too large")
	// ErrRange: a Range header that cannot be satisfied.
	ErrRange = errors.New("server: range not satisfiable")
	// ErrOverloaded: the in-flight memory budget or context limit is used
	// up; retry later.
	ErrOverloaded = errors.New("server: overloaded")
	// ErrUnavailable: the server is shutting down or timed out.
	ErrUnavailable = errors.New("server: unavailable")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("server: invalid config")
	// ErrPinQuota: a hard pin (retention class pinned) would take the
	// namespace over retention.pinned_quota; nothing was stored or changed.
	ErrPinQuota = errors.New("server: pinned quota exceeded")
)

// errorRows map the server's sentinels, and those of the packages it
// fronts that have no HTTP surface of their own (auth, the conductor's
// scheduler), to HTTP answers.
var errorRows = []httperr.Row{
	{Err: auth.ErrThrottled, Status: http.StatusTooManyRequests, Code: "too_many_auth_failures"},
	{Err: auth.ErrUnauthenticated, Status: http.StatusUnauthorized, Code: "unauthenticated"},
	{Err: auth.ErrForbidden, Status: http.StatusForbidden, Code: "forbidden"},
	{Err: ErrBadJSON, Status: http.StatusBadRequest, Code: "invalid_json"},
	{Err: ErrBadRequest, Status: http.StatusBadRequest, Code: "bad_request"},
	{Err: ErrNoCluster, Status: http.StatusNotFound, Code: "no_cluster"},
	{Err: ErrNotFound, Status: http.StatusNotFound, Code: "not_found"},
	{Err: ErrConflict, Status: http.StatusConflict, Code: "conflict"},
	{Err: ErrPinQuota, Status: http.StatusConflict, Code: "pin_quota"},
	{Err: ErrLengthRequired, Status: http.StatusLengthRequired, Code: "length_required"},
	{Err: ErrTooLarge, Status: http.StatusRequestEntityTooLarge, Code: "too_large"},
	{Err: ErrURITooLong, Status: http.StatusRequestURITooLong, Code: "uri_too_long"},
	{Err: ErrHeadersTooLarge, Status: http.StatusRequestHeaderFieldsTooLarge, Code: "headers_too_large"},
	{Err: ErrRange, Status: http.StatusRequestedRangeNotSatisfiable, Code: "invalid_range"},
	{Err: ErrOverloaded, Status: http.StatusTooManyRequests, Code: "overloaded"},
	{Err: ErrUnavailable, Status: http.StatusServiceUnavailable, Code: "unavailable"},
	// The conductor's. A bad request wraps the key format's error that
	// caused it, so these go before httperr.Common.
	{Err: scheduler.ErrUnknownInstance, Status: http.StatusNotFound, Code: "not_found"},
	{Err: scheduler.ErrUnknownRequest, Status: http.StatusNotFound, Code: "not_found"},
	{Err: scheduler.ErrDuplicate, Status: http.StatusConflict, Code: "conflict"},
	{Err: scheduler.ErrTooManyInstances, Status: http.StatusConflict, Code: "too_many_instances"},
	{Err: scheduler.ErrNoPrefill, Status: http.StatusServiceUnavailable, Code: "no_instances"},
	{Err: scheduler.ErrRequest, Status: http.StatusBadRequest, Code: "bad_request"},
	{Err: scheduler.ErrInstance, Status: http.StatusBadRequest, Code: "bad_request"},
	// The router's, OpenAI-style. A failed retry wraps the reason it had
	// nowhere to go, so ErrUpstream goes first.
	{Err: router.ErrUpstream, Status: http.StatusBadGateway, Code: "engine_failed"},
	{Err: router.ErrBadRequest, Status: http.StatusBadRequest, Code: "invalid_request"},
	{Err: router.ErrModelNotFound, Status: http.StatusNotFound, Code: "model_not_found"},
	{Err: router.ErrOverloaded, Status: http.StatusTooManyRequests, Code: "overloaded"},
	{Err: router.ErrNoEngine, Status: http.StatusServiceUnavailable, Code: "no_engine"},
}

// errorTable is the one mapping from an error to an HTTP status and a
// stable machine-readable code, shared with the cluster's internal API
// (cluster.ErrorRows, httperr.Common). Every handler, the conductor's
// included, reports failures through it, so a given cause always gets the
// same answer.
var errorTable = httperr.Join(errorRows, cluster.ErrorRows, httperr.Common)

func apiError(err error) (status int, code string) { return errorTable.Status(err) }

// The JSON body of every error response.
type (
	errorBody   = httperr.Body
	errorDetail = httperr.Detail
)
