package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Row maps errors to an HTTP status and a stable code. Err is a sentinel
// matched with errors.Is; Kind, set instead, matches the sentinels of that
// kind (see Kinded) without naming their package; As, set instead, matches
// error types (errors.As).
type Row struct {
	Err    error
	Kind   string
	As     func(error) bool
	Status int
	Code   string
}

// Kinded is a sentinel error that names itself, by its Go name
// ("tier.ErrNotFound"): how the packages below the HTTP surfaces (block,
// tier) export their sentinels to this table, which imports none of them.
type Kinded interface {
	error
	Kind() string
}

func (r Row) matches(err error) bool {
	switch {
	case r.As != nil:
		return r.As(err)
	case r.Kind != "":
		return hasKind(err, r.Kind)
	}
	return errors.Is(err, r.Err)
}

// hasKind reports whether err or an error it wraps is a Kinded of kind,
// walking the tree as errors.Is does.
func hasKind(err error, kind string) bool {
	for err != nil {
		if k, ok := err.(Kinded); ok && k.Kind() == kind {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if hasKind(e, kind) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// kindError stands for the sentinel of a kind where an answer is turned
// back into an error (Table.Err): errors.Is(kindError{k}, s) holds for the
// Kinded sentinel s of kind k.
type kindError struct{ kind string }

func (e kindError) Error() string { return e.kind }

// Kind makes a kindError Kinded, so that it gets its sentinel's answer.
func (e kindError) Kind() string { return e.kind }

func (e kindError) Is(target error) bool {
	k, ok := target.(Kinded)
	return ok && k.Kind() == e.kind
}

// Table is an ordered list of rows: the first that matches wins, so a row
// goes before the rows of sentinels its errors may be wrapped together with.
type Table []Row

// Join concatenates groups of rows into a table. A sentinel listed twice is
// a programming error (two answers for one cause), and panics.
func Join(groups ...[]Row) Table {
	var t Table
	seen := make(map[any]bool)
	for _, g := range groups {
		for _, r := range g {
			var id any
			switch {
			case r.Kind != "":
				id = r.Kind
			case r.Err != nil:
				id = r.Err
				if k, ok := r.Err.(Kinded); ok {
					id = k.Kind()
				}
			}
			if id != nil {
				if seen[id] {
					panic(fmt.Sprintf("httperr: %v mapped twice", id))
				}
				seen[id] = true
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
		if r.Code != code {
			continue
		}
		if r.Err != nil {
			return r.Err
		}
		if r.Kind != "" {
			return kindError{r.Kind}
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
	{Kind: "block.ErrInvalidKey", Status: http.StatusBadRequest, Code: "invalid_key"},
	{Kind: "block.ErrInvalidNamespace", Status: http.StatusBadRequest, Code: "invalid_namespace"},
	{Kind: "block.ErrInvalidBlockSize", Status: http.StatusBadRequest, Code: "invalid_block_size"},
	{Kind: "block.ErrInvalidToken", Status: http.StatusBadRequest, Code: "invalid_token"},
	{Kind: "tier.ErrMeta", Status: http.StatusBadRequest, Code: "bad_request"},
	{Kind: "tier.ErrRetention", Status: http.StatusBadRequest, Code: "bad_request"},
	{Kind: "tier.ErrSize", Status: http.StatusBadRequest, Code: "size_mismatch"},
	{Kind: "tier.ErrNotFound", Status: http.StatusNotFound, Code: "not_found"},
	// The copy failed verification and was dropped: the block is gone, and
	// saying so is more useful than a bare 404.
	{Kind: "block.ErrCorrupt", Status: http.StatusNotFound, Code: "corrupt_dropped"},
	{Kind: "tier.ErrExists", Status: http.StatusConflict, Code: "conflict"},
	{Kind: "tier.ErrTooLarge", Status: http.StatusRequestEntityTooLarge, Code: "too_large"},
	{As: isMaxBytes, Status: http.StatusRequestEntityTooLarge, Code: "too_large"},
	{Kind: "tier.ErrChecksum", Status: http.StatusUnprocessableEntity, Code: "checksum_mismatch"},
	{Kind: "tier.ErrNoSpace", Status: http.StatusInsufficientStorage, Code: "no_space"},
	{Kind: "tier.ErrClosed", Status: http.StatusServiceUnavailable, Code: "unavailable"},
	// A tier's device is failing (tier/ssd degraded): retry later.
	{Kind: "tier.ErrUnavailable", Status: http.StatusServiceUnavailable, Code: "unavailable"},
	{Err: context.DeadlineExceeded, Status: http.StatusServiceUnavailable, Code: "timeout"},
	// The client went away; nobody reads the answer.
	{Err: context.Canceled, Status: 499, Code: "canceled"},
}
