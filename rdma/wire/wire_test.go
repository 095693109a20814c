package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/rdma"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{Version: 1, Type: Hello},
		{Version: 1, Type: Read, ID: 1<<64 - 1, Segment: 0xdeadbeef00000001, Offset: 1 << 40, Length: 1 << 20},
		{Version: 1, Type: Error, Code: CodeOutOfRange, ID: 9, Length: 12, CRC: 0xabcdef01},
	} {
		var b [HeaderSize]byte
		h.Put(b[:])
		got, err := ParseHeader(b[:])
		if err != nil || got != h {
			t.Fatalf("ParseHeader(Put(%+v)) = %+v, %v", h, got, err)
		}
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good := func() []byte {
		var b [HeaderSize]byte
		h := Header{Version: 1, Type: Write, Length: 10}
		h.Put(b[:])
		return b[:]
	}
	reseal := func(b []byte) []byte {
		h := Header{}
		// Re-encode fields as they are so the header CRC matches; used to
		// reach the checks after the CRC.
		h.Version, h.Type = b[2], Type(b[3])
		h.Flags = uint16(b[6]) | uint16(b[7])<<8
		h.Put(b)
		return b
	}
	f := func(name string, b []byte) {
		t.Helper()
		if _, err := ParseHeader(b); !errors.Is(err, rdma.ErrProtocol) {
			t.Errorf("%s: err = %v, want ErrProtocol", name, err)
		}
	}
	f("short", good()[:HeaderSize-1])
	b := good()
	b[0] = 'X'
	f("magic", b)
	b = good()
	b[20] ^= 1
	f("crc", b)
	b = good()
	b[3] = 0
	f("type 0", reseal(b))
	b = good()
	b[3] = 13
	f("type 13", reseal(b))
	b = good()
	b[6] = 1
	f("flags", reseal(b))
}

func TestReadHeaderTruncated(t *testing.T) {
	var b [HeaderSize]byte
	(&Header{Version: 1, Type: Read}).Put(b[:])
	if _, err := ReadHeader(bytes.NewReader(b[:10]), make([]byte, HeaderSize)); !errors.Is(err, rdma.ErrProtocol) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := ReadHeader(bytes.NewReader(nil), make([]byte, HeaderSize)); err != io.EOF {
		t.Fatalf("empty: %v, want io.EOF", err)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	payload := []byte("segment-name")
	if err := WriteFrame(&buf, Header{Version: 1, Type: Open, ID: 3}, payload); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHeader(&buf, make([]byte, HeaderSize))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadControl(&buf, h, 100)
	if err != nil || string(got) != string(payload) || h.ID != 3 {
		t.Fatalf("got %q %+v %v", got, h, err)
	}
}

func TestReadControlLimits(t *testing.T) {
	f := func(name string, h Header, body []byte, limit int) {
		t.Helper()
		if _, err := ReadControl(bytes.NewReader(body), h, limit); !errors.Is(err, rdma.ErrProtocol) {
			t.Errorf("%s: err = %v, want ErrProtocol", name, err)
		}
	}
	f("over limit", Header{Length: 101}, make([]byte, 101), 100)
	f("over MaxControl", Header{Length: MaxControl + 1}, nil, 1<<30)
	f("truncated", Header{Length: 10}, make([]byte, 5), 100)
	f("crc", Header{Length: 3, CRC: 1}, []byte("abc"), 100)
}

func TestHello(t *testing.T) {
	m := HelloMsg{Min: 1, Max: 3, Session: 0x1122334455667788, Token: []byte("secret")}
	got, err := ParseHello(m.Append(nil))
	if err != nil || got.Min != 1 || got.Max != 3 || got.Session != m.Session || string(got.Token) != "secret" {
		t.Fatalf("ParseHello = %+v, %v", got, err)
	}
	if v, err := Negotiate(got); err != nil || v != MaxVersion {
		t.Fatalf("Negotiate = %d, %v", v, err)
	}
	if v, err := Negotiate(HelloMsg{Min: 1, Max: 1}); err != nil || v != 1 {
		t.Fatalf("Negotiate with a version 1 peer = %d, %v", v, err)
	}
	if _, err := Negotiate(HelloMsg{Min: MaxVersion + 1, Max: 9}); !errors.Is(err, rdma.ErrVersion) {
		t.Fatalf("Negotiate future-only = %v", err)
	}
	pad := make([]byte, 8)
	for _, bad := range [][]byte{nil, {1, 1, 0, 0}, append([]byte{0, 1, 0, 0}, pad...), append([]byte{2, 1, 0, 0}, pad...), append([]byte{1, 1, 1, 0}, pad...), make([]byte, MaxHello+1)} {
		if _, err := ParseHello(bad); !errors.Is(err, rdma.ErrProtocol) {
			t.Errorf("ParseHello(%v) = %v", bad, err)
		}
	}
}

func TestTokenEqual(t *testing.T) {
	if !TokenEqual([]byte("a"), []byte("a")) || TokenEqual([]byte("a"), []byte("b")) || TokenEqual([]byte("a"), []byte("aa")) {
		t.Fatal("TokenEqual wrong")
	}
}

func TestDescriptor(t *testing.T) {
	d := Descriptor{Size: 1 << 30, MaxSlice: 1 << 24, Name: "kv", Location: "cpu:0",
		Preferred: []string{"127.0.0.2:7070", "127.0.0.3:7070"}, Secondary: []string{"127.0.0.4:7070"}}
	b := d.Append(nil)
	got, err := ParseDescriptor(b)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(d) {
		t.Fatalf("ParseDescriptor = %+v, %v", got, err)
	}
	bad := map[string][]byte{
		"short":     b[:11],
		"truncated": b[:len(b)-1],
		"trailing":  append(append([]byte{}, b...), 0),
		"zero size": Descriptor{MaxSlice: 1, Name: "a", Location: "b"}.Append(nil),
		"no name":   Descriptor{Size: 1, MaxSlice: 1, Location: "b"}.Append(nil),
		"empty nic": Descriptor{Size: 1, MaxSlice: 1, Name: "a", Location: "b", Preferred: []string{""}}.Append(nil),
		"many nics": append(Descriptor{Size: 1, MaxSlice: 1, Name: "a", Location: "b"}.Append(nil)[:17], MaxNICs+1),
	}
	for name, in := range bad {
		if _, err := ParseDescriptor(in); !errors.Is(err, rdma.ErrProtocol) {
			t.Errorf("%s: err = %v, want ErrProtocol", name, err)
		}
	}
}

func TestCodes(t *testing.T) {
	for _, err := range []error{rdma.ErrAuth, rdma.ErrVersion, rdma.ErrSegmentNotFound, rdma.ErrOutOfRange,
		rdma.ErrChecksum, rdma.ErrNotShared, rdma.ErrBusy, rdma.ErrProtocol} {
		wrapped := fmt.Errorf("ctx: %w", err)
		if got := CodeOf(wrapped).Err(); got != err {
			t.Errorf("CodeOf(%v).Err() = %v", err, got)
		}
	}
	if CodeOf(errors.New("other")) != CodeProtocol || Code(999).Err() != rdma.ErrProtocol {
		t.Error("unknown errors and codes should be protocol errors")
	}
}

func TestPeerErrorSanitizes(t *testing.T) {
	err := PeerError(Header{Code: CodeOutOfRange}, []byte("bad\x1b[31m\nrange"+strings.Repeat("x", 1000)))
	if !errors.Is(err, rdma.ErrOutOfRange) {
		t.Fatalf("PeerError = %v", err)
	}
	if s := err.Error(); strings.ContainsAny(s, "\x1b\n") || len(s) > MaxMessage+100 {
		t.Fatalf("unsanitized: %q", s)
	}
}

func TestDataFrames(t *testing.T) {
	for _, n := range []int{1, ChunkSize - 1, ChunkSize, 3*ChunkSize + 5} {
		payload := bytes.Repeat([]byte{0x5a, 0x17, 0x99}, n/3+1)[:n]
		var buf bytes.Buffer
		if err := WriteData(&buf, Header{Version: 1, Type: ReadData, ID: 4}, payload); err != nil {
			t.Fatal(err)
		}
		if buf.Len() != HeaderSize+n+TrailerSize {
			t.Fatalf("frame of %d bytes for %d of payload", buf.Len(), n)
		}
		wire := bytes.Clone(buf.Bytes())
		h, err := ReadHeader(&buf, make([]byte, HeaderSize))
		if err != nil || h.Length != uint32(n) || h.CRC != 0 {
			t.Fatalf("header %+v, %v", h, err)
		}
		dst := make([]byte, n)
		if err := RecvData(&buf, h, dst); err != nil || !bytes.Equal(dst, payload) {
			t.Fatalf("RecvData: %v", err)
		}
		// Flip a payload bit: checksum error, stream still in step.
		wire[HeaderSize+n/2] ^= 1
		r := bytes.NewReader(wire[HeaderSize:])
		if err := RecvData(r, h, dst); !errors.Is(err, rdma.ErrChecksum) || r.Len() != 0 {
			t.Fatalf("corrupt payload: %v (left %d)", err, r.Len())
		}
		if err := RecvData(bytes.NewReader(wire[HeaderSize:len(wire)-1]), h, dst); !errors.Is(err, rdma.ErrProtocol) {
			t.Fatalf("truncated trailer: %v", err)
		}
		r = bytes.NewReader(wire[HeaderSize:])
		if err := SkipData(r, h); err != nil || r.Len() != 0 {
			t.Fatalf("SkipData: %v (left %d)", err, r.Len())
		}
	}
	h := Header{Version: 1, Type: Write, Length: 1, CRC: 7}
	if err := RecvData(bytes.NewReader([]byte{1, 0, 0, 0, 0}), h, make([]byte, 1)); !errors.Is(err, rdma.ErrProtocol) {
		t.Fatalf("CRC in a data header: %v", err)
	}
}
