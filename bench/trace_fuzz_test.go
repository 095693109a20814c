package bench

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

// FuzzParseTraceLine checks that any line either parses into a request that
// satisfies the format's invariants and survives a round trip, or fails with
// a *TraceError for that line. Seeds are in testdata/fuzz.
func FuzzParseTraceLine(f *testing.F) {
	f.Add([]byte(`{"timestamp": 27000, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2111, 2112]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseTraceLine(line, 7)
		if err != nil {
			var te *TraceError
			if !errors.As(err, &te) || te.Line != 7 || !errors.Is(err, ErrTrace) {
				t.Fatalf("error %v is not a *TraceError for line 7", err)
			}
			return
		}
		if r.Timestamp < 0 || r.InputLength < 1 || r.OutputLength < 0 {
			t.Fatalf("accepted out-of-range request %+v", r)
		}
		if want := (r.InputLength + TraceBlockTokens - 1) / TraceBlockTokens; len(r.HashIDs) != want {
			t.Fatalf("accepted %d ids for %d tokens", len(r.HashIDs), r.InputLength)
		}
		b, err := json.Marshal(map[string]any{
			"timestamp": r.Timestamp.Milliseconds(), "input_length": r.InputLength,
			"output_length": r.OutputLength, "hash_ids": r.HashIDs,
		})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := parseTraceLine(b, 1)
		if err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if r2.Timestamp != r.Timestamp || r2.InputLength != r.InputLength || r2.OutputLength != r.OutputLength || !slices.Equal(r2.HashIDs, r.HashIDs) {
			t.Fatalf("round trip changed %+v into %+v", r, r2)
		}
	})
}
