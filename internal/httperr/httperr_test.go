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
)

var (
	errA = errors.New("a")
	errB = errors.New("b")
)

// kinded is a sentinel of a package below the HTTP surfaces, as block and
// tier define theirs.
type kinded struct{ kind, msg string }

func (e *kinded) Error() string { return e.msg }
func (e *kinded) Kind() string  { return e.kind }

var (
	errNotFound = &kinded{"tier.ErrNotFound", "tier: block not found"}
	errCorrupt  = &kinded{"block.ErrCorrupt", "block: corrupt block"}
	errChecksum = &kinded{"tier.ErrChecksum", "tier: checksum mismatch"}
	errTooLarge = &kinded{"tier.ErrTooLarge", "tier: block too large"}
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
		{fmt.Errorf("%w: %w", errB, errNotFound), 400, "b"},
		{errNotFound, 404, "not_found"},
		{errCorrupt, 404, "corrupt_dropped"},
		{fmt.Errorf("body: %w", mbe), 413, "too_large"},
		{context.DeadlineExceeded, 503, "timeout"},
		{errors.Join(errors.New("x"), fmt.Errorf("y: %w", errChecksum)), 422, "checksum_mismatch"},
		{&kinded{"tier.ErrNotFound", "another value of the kind"}, 404, "not_found"},
		{errors.New("tier.ErrNotFound"), 500, "internal"}, // a kind is not a message
		{errors.New("other"), 500, "internal"},
	} {
		if s, c := tab.Status(tc.err); s != tc.status || c != tc.code {
			t.Errorf("Status(%v) = %d %s, want %d %s", tc.err, s, c, tc.status, tc.code)
		}
	}
	// Codes come back as errors that are their sentinels; a code of a type
	// row or no row does not.
	for code, want := range map[string]error{"a": errA, "not_found": errNotFound, "corrupt_dropped": errCorrupt, "too_large": errTooLarge} {
		got := tab.Err(code)
		if !errors.Is(got, want) {
			t.Errorf("Err(%q) = %v, want %v", code, got, want)
		}
		if s, c := tab.Status(got); c != code {
			t.Errorf("Status(Err(%q)) = %d %s", code, s, c)
		}
	}
	if got := tab.Err("nope"); got != nil {
		t.Errorf("Err(nope) = %v", got)
	}
	if errors.Is(tab.Err("not_found"), errCorrupt) {
		t.Error("Err(not_found) is a corrupt block")
	}
}

func TestJoinRefusesTwoAnswers(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a sentinel mapped twice did not panic")
		}
	}()
	Join([]Row{{Err: errCorrupt, Status: 422, Code: "corrupt"}}, Common)
}

func TestJoinRefusesTwoAnswersForAKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a kind mapped twice did not panic")
		}
	}()
	Join([]Row{{Kind: "tier.ErrNotFound", Status: 410, Code: "gone"}}, Common)
}

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Join(Common).Write(rec, fmt.Errorf("read: %w", errChecksum))
	if rec.Code != 422 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var b Body
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if b.Error.Code != "checksum_mismatch" || b.Error.Message != "read: "+errChecksum.Error() {
		t.Errorf("body %+v", b)
	}
}
