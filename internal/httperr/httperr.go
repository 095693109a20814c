package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
)

// Row maps errors to an HTTP status and a stable code. Err is a sentinel
// matched with errors.Is; As, when set instead, matches error types
// (errors.As).
type Row struct {
	Err    error
	As     func(error) bool
	Status int
	Code   string
}

func (r Row) matches(err error) bool {
	if r.As != nil {
		return r.As(err)
	}
	return errors.Is(err, r.Err)
}

// Table is an ordered list of rows: the first that matches wins, so a row
// goes before the rows of sentinels its errors may be wrapped together with.
type Table []Row

// Join concatenates groups of rows into a table. A sentinel listed twice is
// a programming error (two answers for one cause), and panics.
func Join(groups ...[]Row) Table {
	var t Table
	seen := make(map[error]bool)
	for _, g := range groups {
		for _, r := range g {
			if r.Err != nil {
				if seen[r.Err] {
					panic(fmt.Sprintf("httperr: %v mapped twice", r.Err))
				}
				seen[r.Err] = true
			}
			t = append(t, r)
		}
	}
	return t
}

// Status returns err's status and code: 200 and "" for nil, 500 and
// "internal" for an error no row matches.
func (t Table) Status(err error) (status int, code string) {
	if err == nil {
		return http.StatusOK, ""
	}
	for _, r := range t {
		if r.matches(err) {
			return r.Status, r.Code
		}
	}
	return http.StatusInternalServerError, "internal"
}

// Err returns the sentinel of the first row with code, or nil: how a
// client of a surface turns an answer back into an error it can test with
// errors.Is.
func (t Table) Err(code string) error {
	for _, r := range t {
		if r.Code == code && r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// Write answers err on a net/http handler.
func (t Table) Write(w http.ResponseWriter, err error) {
	status, code := t.Status(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(Body{Error: Detail{Code: code, Message: err.Error()}})
}

// Body is the JSON body of every error answer.
type Body struct {
	Error Detail `json:"error"`
}

// Detail is the error inside a Body.
type Detail struct {
	Code string `json:"code"`
	// Type is the OpenAI error type (OpenAIType), set on the OpenAI
	// endpoints' answers, where clients read it.
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

// OpenAIType returns the OpenAI API's error type for an HTTP status.
func OpenAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func isMaxBytes(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// Common are the rows of the sentinels below the HTTP surfaces.
var Common = []Row{
	{Err: block.ErrInvalidKey, Status: http.StatusBadRequest, Code: "invalid_key"},
	{Err: block.ErrInvalidNamespace, Status: http.StatusBadRequest, Code: "invalid_namespace"},
	{Err: block.ErrInvalidBlockSize, Status: http.StatusBadRequest, Code: "invalid_block_size"},
	{Err: block.ErrInvalidToken, Status: http.StatusBadRequest, Code: "invalid_token"},
	{Err: tier.ErrMeta, Status: http.StatusBadRequest, Code: "bad_request"},
	{Err: tier.ErrSize, Status: http.StatusBadRequest, Code: "size_mismatch"},
	{Err: tier.ErrNotFound, Status: http.StatusNotFound, Code: "not_found"},
	// The copy failed verification and was dropped: the block is gone, and
	// saying so is more useful than a bare 404.
	{Err: tier.ErrCorrupt, Status: http.StatusNotFound, Code: "corrupt_dropped"},
	{Err: tier.ErrExists, Status: http.StatusConflict, Code: "conflict"},
	{Err: tier.ErrTooLarge, Status: http.StatusRequestEntityTooLarge, Code: "too_large"},
	{As: isMaxBytes, Status: http.StatusRequestEntityTooLarge, Code: "too_large"},
	{Err: tier.ErrChecksum, Status: http.StatusUnprocessableEntity, Code: "checksum_mismatch"},
	{Err: tier.ErrNoSpace, Status: http.StatusInsufficientStorage, Code: "no_space"},
	{Err: tier.ErrClosed, Status: http.StatusServiceUnavailable, Code: "unavailable"},
	// A tier's device is failing (tier/ssd degraded): retry later.
	{Err: tier.ErrUnavailable, Status: http.StatusServiceUnavailable, Code: "unavailable"},
	{Err: context.DeadlineExceeded, Status: http.StatusServiceUnavailable, Code: "timeout"},
	// The client went away; nobody reads the answer.
	{Err: context.Canceled, Status: 499, Code: "canceled"},
}
