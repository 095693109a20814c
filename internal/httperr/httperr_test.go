package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/tier"
)

var (
	errA = errors.New("a")
	errB = errors.New("b")
)

func TestTable(t *testing.T) {
	tab := Join([]Row{
		{Err: errA, Status: http.StatusConflict, Code: "a"},
		{Err: errB, Status: http.StatusBadRequest, Code: "b"},
	}, Common)
	mbe := &http.MaxBytesError{Limit: 10}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{nil, 200, ""},
		{errA, 409, "a"},
		{fmt.Errorf("x: %w", errB), 400, "b"},
		{fmt.Errorf("%w: %w", errA, errB), 409, "a"}, // first row wins
		{fmt.Errorf("%w: %w", errB, tier.ErrNotFound), 400, "b"},
		{tier.ErrNotFound, 404, "not_found"},
		{tier.ErrCorrupt, 404, "corrupt_dropped"},
		{fmt.Errorf("body: %w", mbe), 413, "too_large"},
		{context.DeadlineExceeded, 503, "timeout"},
		{errors.New("other"), 500, "internal"},
	} {
		if s, c := tab.Status(tc.err); s != tc.status || c != tc.code {
			t.Errorf("Status(%v) = %d %s, want %d %s", tc.err, s, c, tc.status, tc.code)
		}
	}
	// Codes come back as their sentinels; a code of a type row or no row
	// does not.
	for code, want := range map[string]error{"a": errA, "not_found": tier.ErrNotFound, "corrupt_dropped": tier.ErrCorrupt, "too_large": tier.ErrTooLarge, "nope": nil} {
		if got := tab.Err(code); got != want {
			t.Errorf("Err(%q) = %v, want %v", code, got, want)
		}
	}
}

func TestJoinRefusesTwoAnswers(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a sentinel mapped twice did not panic")
		}
	}()
	Join([]Row{{Err: tier.ErrCorrupt, Status: 422, Code: "corrupt"}}, Common)
}

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Join(Common).Write(rec, fmt.Errorf("read: %w", tier.ErrChecksum))
	if rec.Code != 422 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var b Body
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if b.Error.Code != "checksum_mismatch" || b.Error.Message != "read: "+tier.ErrChecksum.Error() {
		t.Errorf("body %+v", b)
	}
}
