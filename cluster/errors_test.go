package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/httperr"
	"github.com/yuebing/yuebing/tier"
)

// TestStoreErrorAnswers pins the answers to the store's and the key
// format's sentinels, which the table maps by kind without importing their
// packages: each sentinel, wrapped, gets the status and code it always had,
// and an answer's code comes back as an error that is the sentinel.
func TestStoreErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		err    error
		kind   string
		status int
		code   string
	}{
		{block.ErrInvalidKey, "block.ErrInvalidKey", 400, "invalid_key"},
		{block.ErrInvalidNamespace, "block.ErrInvalidNamespace", 400, "invalid_namespace"},
		{block.ErrInvalidBlockSize, "block.ErrInvalidBlockSize", 400, "invalid_block_size"},
		{block.ErrInvalidToken, "block.ErrInvalidToken", 400, "invalid_token"},
		{tier.ErrMeta, "tier.ErrMeta", 400, "bad_request"},
		{tier.ErrSize, "tier.ErrSize", 400, "size_mismatch"},
		{tier.ErrNotFound, "tier.ErrNotFound", 404, "not_found"},
		{tier.ErrCorrupt, "block.ErrCorrupt", 404, "corrupt_dropped"},
		{tier.ErrExists, "tier.ErrExists", 409, "conflict"},
		{tier.ErrTooLarge, "tier.ErrTooLarge", 413, "too_large"},
		{tier.ErrChecksum, "tier.ErrChecksum", 422, "checksum_mismatch"},
		{tier.ErrNoSpace, "tier.ErrNoSpace", 507, "no_space"},
		{tier.ErrClosed, "tier.ErrClosed", 503, "unavailable"},
		{tier.ErrUnavailable, "tier.ErrUnavailable", 503, "unavailable"},
	} {
		if k, ok := tc.err.(httperr.Kinded); !ok || k.Kind() != tc.kind {
			t.Errorf("%v: not a sentinel of kind %s", tc.err, tc.kind)
		}
		for _, err := range []error{tc.err, fmt.Errorf("put: %w", tc.err), errors.Join(errors.New("x"), tc.err)} {
			if s, c := errorTable.Status(err); s != tc.status || c != tc.code {
				t.Errorf("Status(%v) = %d %s, want %d %s", err, s, c, tc.status, tc.code)
			}
		}
	}
	// The first row of a code answers for it: tier.ErrClosed for
	// "unavailable", the cluster's own ErrBadRequest for "bad_request".
	for code, want := range map[string]error{
		"not_found": tier.ErrNotFound, "corrupt_dropped": tier.ErrCorrupt, "conflict": tier.ErrExists,
		"too_large": tier.ErrTooLarge, "checksum_mismatch": tier.ErrChecksum, "no_space": tier.ErrNoSpace,
		"unavailable": tier.ErrClosed, "invalid_key": block.ErrInvalidKey, "size_mismatch": tier.ErrSize,
		"bad_request": ErrBadRequest, "unreachable": ErrUnreachable,
	} {
		if got := errorTable.Err(code); !errors.Is(got, want) {
			t.Errorf("Err(%q) = %v, want %v", code, got, want)
		}
	}
	if errors.Is(errorTable.Err("unavailable"), tier.ErrUnavailable) || errors.Is(errorTable.Err("not_found"), tier.ErrCorrupt) {
		t.Error("an answer's code came back as another sentinel")
	}
	for _, tc := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("body: %w", &http.MaxBytesError{Limit: 1}), 413},
		{context.DeadlineExceeded, 503},
		{context.Canceled, 499},
		{errors.New("other"), 500},
	} {
		if s, _ := errorTable.Status(tc.err); s != tc.status {
			t.Errorf("Status(%v) = %d, want %d", tc.err, s, tc.status)
		}
	}
}
