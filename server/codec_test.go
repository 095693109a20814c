package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/block/frame"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []blockMeta{
		{Namespace: "a/b"},
		{Namespace: "acme/meta-llama/Llama-3-70B#s3cret"},
		{Namespace: "a/b", Name: "", HasName: true},
		{Namespace: "a/b", Name: "model@1@0@deadbeef", HasName: true},
		{Namespace: strings.Repeat("n", 200), Name: strings.Repeat("x", maxMetaText-200), HasName: true},
	} {
		b, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("encodeMeta(%+v): %v", m, err)
		}
		if len(b) > tier.MaxMeta || b[0] != 'H' {
			t.Fatalf("record of %d bytes, kind %q", len(b), b[0])
		}
		got, ok := decodeMeta(b)
		if !ok || got != m {
			t.Fatalf("decodeMeta(encodeMeta(%+v)) = %+v, %v", m, got, ok)
		}
	}
	if _, err := encodeMeta(blockMeta{Namespace: "a/b", Name: strings.Repeat("x", maxMetaText), HasName: true}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("oversized record: %v", err)
	}
	// Records of other kinds, versions or shapes are not ours.
	good, _ := encodeMeta(blockMeta{Namespace: "a/b", Name: "n", HasName: true})
	for _, b := range [][]byte{nil, {}, []byte("R\x01\x00\x03\x00a/b"), append([]byte{'H', 2}, good[2:]...),
		append([]byte{'H', 1, 4}, good[3:]...), good[:len(good)-1], append(good, 0)} {
		if m, ok := decodeMeta(b); ok {
			t.Errorf("decodeMeta(%q) = %+v, accepted", b, m)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []blockMeta{{Namespace: "a/b"}, {Namespace: "a/b", Name: "x", HasName: true}} {
		b, _ := encodeMeta(m)
		f.Add(b)
	}
	f.Add([]byte("H\x01\x01\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := decodeMeta(b)
		if !ok {
			return
		}
		again, err := encodeMeta(m)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %q, re-encodes as %q, %v", b, again, err)
		}
	})
}

func TestFrameReader(t *testing.T) {
	var k1, k2 block.Key
	k1[0], k2[0] = 1, 2
	body := frames(t, []testFrame{{key: k1, data: []byte("hello"), crc: 7, hasCRC: true}, {key: k2, data: nil}, {key: k1, data: []byte("skipped")}})
	fr := newFrameReader(bytes.NewReader(body), frame.PutFlags, 100)
	h, err := fr.Next()
	if err != nil || h.Key != k1 || !h.HasCRC() || h.CRC != 7 || h.Length != 5 {
		t.Fatalf("frame 1 = %+v, %v", h, err)
	}
	data, err := io.ReadAll(fr.Data())
	if err != nil || string(data) != "hello" {
		t.Fatalf("frame 1 data %q, %v", data, err)
	}
	if h, err = fr.Next(); err != nil || h.Key != k2 || h.Length != 0 {
		t.Fatalf("frame 2 = %+v, %v", h, err)
	}
	if _, err = fr.Next(); err != nil {
		t.Fatal(err)
	}
	// The third frame's data is not read: Next skips it.
	if _, err := fr.Next(); err != io.EOF {
		t.Fatalf("end = %v", err)
	}

	bad := func(name string, body []byte, want error) {
		t.Helper()
		fr := newFrameReader(bytes.NewReader(body), frame.PutFlags, 100)
		var err error
		for err == nil {
			if _, err = fr.Next(); err == nil {
				_, err = io.ReadAll(fr.Data())
			}
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	good := frames(t, []testFrame{{key: k1, data: []byte("hello")}})
	bad("empty", nil, ErrBadRequest)
	bad("wrong magic", []byte("YBF2"), ErrBadRequest)
	bad("short magic", []byte("YB"), ErrBadRequest)
	bad("cut header", good[:20], ErrBadRequest)
	bad("cut data", good[:len(good)-1], ErrBadRequest)
	bad("unknown flag", frames(t, []testFrame{{key: k1, flags: 4}}), ErrBadRequest)
	bad("too long", frames(t, []testFrame{{key: k1, length: 101}}), ErrTooLarge)
}

func FuzzFrameReader(f *testing.F) {
	var k block.Key
	f.Add([]byte(frame.Magic))
	f.Add(frames(f, []testFrame{{key: k, data: []byte("abc"), hasCRC: true, crc: 1}, {key: k}}))
	f.Add(frames(f, []testFrame{{key: k, length: 1 << 40}}))
	f.Fuzz(func(t *testing.T, body []byte) {
		fr := newFrameReader(bytes.NewReader(body), frame.PutFlags, 1<<16)
		total := len(frame.Magic)
		for {
			h, err := fr.Next()
			if err == io.EOF {
				if total != len(body) {
					t.Fatalf("clean end after %d of %d bytes", total, len(body))
				}
				return
			}
			if err != nil {
				if !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v wraps neither ErrBadRequest nor ErrTooLarge", err)
				}
				return
			}
			if h.Flags&^frame.PutFlags != 0 || h.Length > 1<<16 {
				t.Fatalf("accepted %+v", h)
			}
			n, err := io.Copy(io.Discard, fr.Data())
			if err != nil {
				if !errors.Is(err, ErrBadRequest) {
					t.Fatalf("data error %v", err)
				}
				return
			}
			if uint64(n) != h.Length {
				t.Fatalf("read %d of %d data bytes without an error", n, h.Length)
			}
			total += frame.HeaderSize + int(n)
		}
	})
}

func TestParseRange(t *testing.T) {
	f := func(h string, size, start, end int64, partial, ok bool) {
		t.Helper()
		s, e, p, err := parseRange(h, size)
		if (err == nil) != ok || ok && (s != start || e != end || p != partial) {
			t.Errorf("parseRange(%q, %d) = %d, %d, %v, %v; want %d, %d, %v, ok=%v", h, size, s, e, p, err, start, end, partial, ok)
		}
		if err != nil && !errors.Is(err, ErrRange) {
			t.Errorf("parseRange(%q) error %v does not wrap ErrRange", h, err)
		}
	}
	f("", 100, 0, 100, false, true)
	f("bytes=0-9", 100, 0, 10, true, true)
	f("bytes=90-", 100, 90, 100, true, true)
	f("bytes=90-1000", 100, 90, 100, true, true)
	f("bytes=-10", 100, 90, 100, true, true)
	f("bytes=-1000", 100, 0, 100, true, true)
	f("bytes=99-99", 100, 99, 100, true, true)
	f("bytes=100-", 100, 0, 0, false, false)
	f("bytes=5-4", 100, 0, 0, false, false)
	f("bytes=-0", 100, 0, 0, false, false)
	f("bytes=-5", 0, 0, 0, false, false)
	f("bytes=0-1,3-4", 100, 0, 0, false, false)
	f("bytes=a-b", 100, 0, 0, false, false)
	f("bytes=+1-2", 100, 0, 0, false, false)
	f("bytes=1-+2", 100, 0, 0, false, false)
	f("items=0-1", 100, 0, 0, false, false)
	f("bytes=99999999999999999999-", 100, 0, 0, false, false)
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=7-", "bytes=1-0", "bytes=0-1,2-3", ""} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -size
		}
		if size < 0 {
			return
		}
		s, e, _, err := parseRange(h, size)
		if err == nil && (s < 0 || e > size || s > e || h != "" && s == e) {
			t.Fatalf("parseRange(%q, %d) = [%d, %d)", h, size, s, e)
		}
	})
}

// FuzzDecodeRequests feeds the JSON request decoders arbitrary bodies: they
// must reject or accept, never panic, and what they accept must pass the
// same validation the handlers apply.
func FuzzDecodeRequests(f *testing.F) {
	f.Add(`{"namespace":"alpha/llama","keys":["` + strings.Repeat("ab", 32) + `"]}`)
	f.Add(`{"namespace":"alpha/llama","names":["a","b/c"]}`)
	f.Add(`{"namespace":"alpha/llama","block_size":16,"tokens":[1,2,3]}`)
	f.Add(`{"namespace":"alpha/llama","tokens":[1],"ttl_seconds":60,"name":"x"}`)
	f.Add(`{"ttl_seconds":-1}`)
	f.Add(`{"keys":[1]} {}`)
	p := auth.Principal{Tenant: "alpha", Role: auth.RoleTenant}
	f.Fuzz(func(t *testing.T, body string) {
		var kr keysRequest
		if err := decodeJSONBody(strings.NewReader(body), &kr); err == nil {
			if ts, err := kr.targets(p, 16); err == nil {
				if len(ts) == 0 || len(ts) > 16 || block.Tenant(kr.Namespace) != "alpha" {
					t.Fatalf("accepted %q as %d targets", body, len(ts))
				}
			}
		} else if !errors.Is(err, ErrBadJSON) {
			t.Fatalf("decode error %v is not ErrBadJSON", err)
		}
		var cr chainRequest
		if err := decodeJSONBody(strings.NewReader(body), &cr); err == nil {
			if keys, bs, err := chainKeys(p, cr.Namespace, cr.BlockSize, cr.Tokens); err == nil && len(keys) != len(cr.Tokens)/bs {
				t.Fatalf("%d keys for %d tokens of block size %d", len(keys), len(cr.Tokens), bs)
			}
		}
		var cc createContextRequest
		_ = decodeJSONBody(strings.NewReader(body), &cc)
		var anyv map[string]any
		if decodeJSONBody(strings.NewReader(body), &anyv) == nil && json.Valid([]byte(body)) == false {
			t.Fatalf("accepted invalid JSON %q", body)
		}
	})
}

func TestAPIErrorMapping(t *testing.T) {
	f := func(err error, status int, code string) {
		t.Helper()
		if s, c := apiError(err); s != status || c != code {
			t.Errorf("apiError(%v) = %d %s, want %d %s", err, s, c, status, code)
		}
	}
	f(block.ErrInvalidKey, 400, "invalid_key")
	f(ErrBadJSON, 400, "invalid_json")
	f(auth.ErrUnauthenticated, 401, "unauthenticated")
	f(auth.ErrForbidden, 403, "forbidden")
	f(tier.ErrNotFound, 404, "not_found")
	f(tier.ErrCorrupt, 404, "corrupt_dropped")
	f(ErrConflict, 409, "conflict")
	f(ErrLengthRequired, 411, "length_required")
	f(tier.ErrTooLarge, 413, "too_large")
	f(ErrRange, 416, "invalid_range")
	f(tier.ErrChecksum, 422, "checksum_mismatch")
	f(ErrOverloaded, 429, "overloaded")
	f(tier.ErrNoSpace, 507, "no_space")
	f(tier.ErrClosed, 503, "unavailable")
	f(errors.New("surprise"), 500, "internal")
}
