package client

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/block/frame"
)

func TestNew(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8080", "http://localhost:8080/", "https://cache.example:443"} {
		if _, err := New(ok, Options{}); err != nil {
			t.Errorf("New(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"ftp://x:1", "http://", "://"} {
		if _, err := New(bad, Options{}); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
}

func TestErrorSentinels(t *testing.T) {
	f := func(status int, want error) {
		t.Helper()
		err := error(&Error{StatusCode: status, Code: "x", Message: "y"})
		if !errors.Is(err, want) {
			t.Errorf("status %d: errors.Is(%v) false", status, want)
		}
	}
	f(400, ErrBadRequest)
	f(401, ErrUnauthenticated)
	f(403, ErrForbidden)
	f(404, ErrNotFound)
	f(409, ErrConflict)
	f(411, ErrLengthRequired)
	f(413, ErrTooLarge)
	f(416, ErrRange)
	f(422, ErrChecksum)
	f(429, ErrOverloaded)
	f(503, ErrUnavailable)
	f(507, ErrNoSpace)
	f(500, ErrServer)
	f(302, ErrProtocol)
	for _, code := range []string{"checksum_mismatch", "conflict", "no_space", "too_large", "bad_request"} {
		e := &Error{StatusCode: statusOfCode(code)}
		if e.Unwrap() == ErrProtocol || e.Unwrap() == ErrServer {
			t.Errorf("item code %s maps to %v", code, e.Unwrap())
		}
	}
}

type testFrame struct {
	key   block.Key
	flags uint32
	data  []byte
	crc   uint32
}

func encodeFrames(fs []testFrame) []byte {
	var b bytes.Buffer
	b.WriteString(frame.Magic)
	for _, f := range fs {
		var h [frame.HeaderSize]byte
		frame.Header{Key: f.key, Flags: f.flags, CRC: f.crc, Length: uint64(len(f.data))}.Encode(&h)
		b.Write(h[:])
		b.Write(f.data)
	}
	return b.Bytes()
}

func TestReadFrames(t *testing.T) {
	var k1, k2 block.Key
	k1[0], k2[0] = 1, 2
	body := encodeFrames([]testFrame{
		{key: k1, flags: frame.FlagCRC | 1<<frame.TierShift, data: []byte("hello"), crc: Checksum([]byte("hello"))},
		{key: k2, flags: frame.FlagMissing},
	})
	var got []Frame
	err := readFrames(bytes.NewReader(body), 2, func(f Frame, r io.Reader) error {
		data, _ := io.ReadAll(r)
		if !f.Missing && string(data) != "hello" {
			t.Errorf("data %q", data)
		}
		got = append(got, f)
		return nil
	})
	if err != nil || len(got) != 2 || got[0].Tier != 1 || got[0].Key != k1 || !got[1].Missing {
		t.Fatalf("readFrames: %+v, %v", got, err)
	}
	// A frame whose bytes do not match its checksum is an error.
	bad := encodeFrames([]testFrame{{key: k1, flags: frame.FlagCRC, data: []byte("hello"), crc: 1}})
	err = readFrames(bytes.NewReader(bad), 1, func(_ Frame, r io.Reader) error { _, err := io.ReadAll(r); return err })
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("bad checksum: %v", err)
	}
	// Fewer or more frames than keys, or a cut body, is a protocol error.
	for _, tc := range []struct {
		body []byte
		n    int
	}{{body, 3}, {body, 1}, {body[:len(body)-1], 2}, {[]byte("nope"), 0}} {
		if err := readFrames(bytes.NewReader(tc.body), tc.n, func(Frame, io.Reader) error { return nil }); !errors.Is(err, ErrProtocol) {
			t.Errorf("%d frames expected: %v", tc.n, err)
		}
	}
}

func FuzzReadFrames(f *testing.F) {
	var k block.Key
	f.Add(encodeFrames([]testFrame{{key: k, flags: frame.FlagCRC, data: []byte("abc"), crc: Checksum([]byte("abc"))}}), 1)
	f.Add(encodeFrames([]testFrame{{key: k, flags: frame.FlagMissing}, {key: k}}), 2)
	f.Add([]byte(frame.Magic), 0)
	f.Fuzz(func(t *testing.T, body []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		frames := 0
		err := readFrames(bytes.NewReader(body), n, func(fr Frame, r io.Reader) error {
			frames++
			m, err := io.Copy(io.Discard, r)
			if err == nil && m > fr.Length {
				t.Fatalf("frame gave %d bytes, length %d", m, fr.Length)
			}
			return nil
		})
		if err == nil && frames != n {
			t.Fatalf("%d frames accepted for %d keys", frames, n)
		}
		if err != nil && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrChecksum) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

func TestErrorAnswers(t *testing.T) {
	resp := &http.Response{StatusCode: 404, Body: io.NopCloser(bytes.NewReader([]byte(`{"error":{"code":"not_found","message":"block x"}}`)))}
	err := decodeError(resp)
	var e *Error
	if !errors.As(err, &e) || e.Code != "not_found" || e.Message != "block x" || !errors.Is(err, ErrNotFound) {
		t.Fatalf("decodeError = %#v", err)
	}
	resp = &http.Response{StatusCode: 502, Body: io.NopCloser(bytes.NewReader([]byte("bad gateway")))}
	if err := decodeError(resp); !errors.Is(err, ErrServer) {
		t.Fatalf("non-JSON 502 = %v", err)
	}
}
