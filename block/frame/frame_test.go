package frame

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/yuebing/yuebing/block"
)

func body(hs []Header, data [][]byte) []byte {
	b := []byte(Magic)
	for i, h := range hs {
		var hb [HeaderSize]byte
		h.Encode(&hb)
		b = append(b, hb[:]...)
		b = append(b, data[i]...)
	}
	return b
}

func TestHeaderRoundTrip(t *testing.T) {
	var k block.Key
	k[0], k[31] = 1, 2
	for _, h := range []Header{
		{Key: k, Flags: FlagCRC, CRC: 0xdeadbeef, Length: 5},
		{Key: k, Flags: FlagMissing | TierRemote<<TierShift},
		{Key: k, Flags: 3 << TierShift, Length: 1 << 40},
	} {
		var b [HeaderSize]byte
		h.Encode(&b)
		if got := Decode(&b); got != h {
			t.Errorf("Decode(Encode(%+v)) = %+v", h, got)
		}
	}
	h := Header{Flags: FlagCRC | FlagMissing | TierRemote<<TierShift}
	if !h.HasCRC() || !h.Missing() || h.Tier() != TierRemote {
		t.Errorf("accessors of %+v", h)
	}
}

func TestReader(t *testing.T) {
	var k block.Key
	good := body([]Header{{Key: k, Flags: FlagCRC, Length: 5}, {Key: k, Length: 3}}, [][]byte{[]byte("hello"), []byte("abc")})
	fr := NewReader(bytes.NewReader(good), PutFlags, 100)
	h, err := fr.Next()
	if err != nil || h.Length != 5 || !h.HasCRC() {
		t.Fatalf("frame 1 = %+v, %v", h, err)
	}
	// Data left unread is skipped by Next.
	if h, err = fr.Next(); err != nil || h.Length != 3 {
		t.Fatalf("frame 2 = %+v, %v", h, err)
	}
	if d, err := io.ReadAll(fr.Data()); err != nil || string(d) != "abc" {
		t.Fatalf("frame 2 data %q, %v", d, err)
	}
	if _, err := fr.Next(); err != io.EOF || fr.Frames() != 2 {
		t.Fatalf("end: %v after %d frames", err, fr.Frames())
	}
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"wrong magic", []byte("YBF2"), ErrMalformed},
		{"cut header", good[:20], ErrMalformed},
		{"cut data", good[:len(good)-1], ErrMalformed},
		{"unknown flag", body([]Header{{Flags: FlagMissing}}, [][]byte{nil}), ErrMalformed},
		{"too long", body([]Header{{Length: 101}}, [][]byte{nil}), ErrTooLarge},
	} {
		fr := NewReader(bytes.NewReader(tc.body), PutFlags, 100)
		var err error
		for err == nil {
			if _, err = fr.Next(); err == nil {
				_, err = io.ReadAll(fr.Data())
			}
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func FuzzReader(f *testing.F) {
	var k block.Key
	f.Add([]byte(Magic))
	f.Add(body([]Header{{Key: k, Flags: FlagCRC, CRC: 1, Length: 3}, {Key: k}}, [][]byte{[]byte("abc"), nil}))
	f.Add(body([]Header{{Key: k, Length: 1 << 40}}, [][]byte{nil}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := NewReader(bytes.NewReader(b), PutFlags, 1<<16)
		total := len(Magic)
		for {
			h, err := fr.Next()
			if err == io.EOF {
				if total != len(b) {
					t.Fatalf("clean end after %d of %d bytes", total, len(b))
				}
				return
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v wraps neither ErrMalformed nor ErrTooLarge", err)
				}
				return
			}
			if h.Flags&^PutFlags != 0 || h.Length > 1<<16 {
				t.Fatalf("accepted %+v", h)
			}
			n, err := io.Copy(io.Discard, fr.Data())
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("data error %v", err)
				}
				return
			}
			if uint64(n) != h.Length {
				t.Fatalf("read %d of %d data bytes without an error", n, h.Length)
			}
			total += HeaderSize + int(n)
		}
	})
}

// A frame with FlagParent carries its parent's key between the header and
// the data; a body cut inside the key is malformed, and a reader that does
// not allow the flag refuses the frame.
func TestReaderParent(t *testing.T) {
	var k, p block.Key
	k[0], p[0], p[31] = 1, 2, 3
	h := Header{Key: k, Flags: FlagCRC | FlagParent, CRC: 7, Length: 3, Parent: p}
	var hb [HeaderSize]byte
	h.Encode(&hb)
	b := append([]byte(Magic), hb[:]...)
	b = h.AppendParent(b)
	b = append(b, "abc"...)
	fr := NewReader(bytes.NewReader(b), PutFlags, 100)
	got, err := fr.Next()
	if err != nil || got != h || !got.HasParent() {
		t.Fatalf("frame = %+v, %v; want %+v", got, err, h)
	}
	if d, err := io.ReadAll(fr.Data()); err != nil || string(d) != "abc" {
		t.Fatalf("data %q, %v", d, err)
	}
	if _, err := NewReader(bytes.NewReader(b[:len(Magic)+HeaderSize+10]), PutFlags, 100).Next(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("body cut inside the parent: %v, want ErrMalformed", err)
	}
	if _, err := NewReader(bytes.NewReader(b), FlagCRC, 100).Next(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("parent not allowed: %v, want ErrMalformed", err)
	}
	if n := len(Header{Flags: FlagCRC}.AppendParent(nil)); n != 0 {
		t.Fatalf("AppendParent without the flag wrote %d bytes", n)
	}
}
