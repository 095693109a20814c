package resp

import (
	"testing"

	"github.com/yuebing/yuebing/tier"
)

func TestRecord(t *testing.T) {
	r := record{flags: flagPaired, gen: 1<<63 + 5, expireAt: 1893456000000, ns: "acme/redis", name: "vllm@m@1@0@abc\x00kv_bytes"}
	b := r.appendTo(nil)
	if len(b) != recordLen(r.ns, len(r.name)) {
		t.Errorf("record of %d bytes, recordLen says %d", len(b), recordLen(r.ns, len(r.name)))
	}
	got, err := parseRecord(b)
	if err != nil || got != r {
		t.Fatalf("parseRecord = %+v, %v; want %+v", got, err, r)
	}
	// The longest key of a namespace fills tier.MaxMeta exactly.
	long := record{ns: "default/redis", name: string(make([]byte, maxKeyLen("default/redis")))}
	if n := len(long.appendTo(nil)); n != tier.MaxMeta {
		t.Errorf("longest key's record is %d bytes, want %d", n, tier.MaxMeta)
	}
	for _, bad := range [][]byte{
		nil,
		[]byte("H\x01"),                  // the HTTP API's records
		append([]byte{'R', 2}, b[2:]...), // a later version
		b[:recordHeader],
		append(append([]byte(nil), b[:recordHeader]...), 200), // namespace longer than the record
	} {
		if _, err := parseRecord(bad); err == nil {
			t.Errorf("parseRecord(%q) accepted", bad)
		}
	}
}

// FuzzRecord: metadata from the store, whatever it holds, never panics the
// parser, and what parses re-encodes to the same bytes.
func FuzzRecord(f *testing.F) {
	r := record{gen: 7, expireAt: 1, ns: "t/redis", name: "k"}
	f.Add(r.appendTo(nil))
	f.Add([]byte("R\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := parseRecord(b)
		if err != nil {
			return
		}
		if got := rec.appendTo(nil); string(got) != string(b) {
			t.Fatalf("re-encoded %q as %q", b, got)
		}
	})
}
