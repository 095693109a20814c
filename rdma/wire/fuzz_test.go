package wire

import (
	"bytes"
	"testing"
)

func FuzzParseHeader(f *testing.F) {
	for _, h := range []Header{{Version: 1, Type: Read, Length: 65536, ID: 1, Segment: 2, Offset: 3}, {Version: 1, Type: Error, Code: CodeBusy}} {
		var b [HeaderSize]byte
		h.Put(b[:])
		f.Add(b[:])
	}
	f.Add([]byte("YT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		var again [HeaderSize]byte
		h.Put(again[:])
		if !bytes.Equal(again[:], b[:HeaderSize]) {
			t.Fatalf("re-encoding %+v gives %x, parsed from %x", h, again, b[:HeaderSize])
		}
	})
}

func FuzzParseHello(f *testing.F) {
	f.Add(HelloMsg{Min: 1, Max: 1, Token: []byte("token")}.Append(nil))
	f.Add([]byte{1, 2, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseHello(b)
		if err != nil {
			return
		}
		if !bytes.Equal(m.Append(nil), b) {
			t.Fatalf("hello %+v does not re-encode to %x", m, b)
		}
		_, _ = Negotiate(m)
	})
}

func FuzzParseDescriptor(f *testing.F) {
	f.Add(Descriptor{Size: 1 << 20, MaxSlice: 1 << 16, Name: "kv", Location: "cpu:0", Preferred: []string{"127.0.0.1:7070"}}.Append(nil))
	f.Add(Descriptor{Size: 1, MaxSlice: 1, Name: "a", Location: "b", Preferred: []string{"x", "y"}, Secondary: []string{"z"}}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDescriptor(b)
		if err != nil {
			return
		}
		if !bytes.Equal(d.Append(nil), b) {
			t.Fatalf("descriptor %+v does not re-encode to %x", d, b)
		}
	})
}

func FuzzReadControl(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteFrame(&buf, Header{Version: 1, Type: Open, ID: 1}, []byte("kv"))
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadHeader(r, make([]byte, HeaderSize))
		if err != nil {
			return
		}
		p, err := ReadControl(r, h, MaxControl)
		if err == nil && len(p) != int(h.Length) {
			t.Fatalf("payload %d bytes, header says %d", len(p), h.Length)
		}
	})
}

// FuzzRecvData feeds arbitrary streams to the data-frame reader: it must
// fill exactly its buffer and never accept a payload whose trailer does not
// match.
func FuzzRecvData(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteData(&buf, Header{Version: 1, Type: Write, ID: 1, Length: 5}, []byte("hello"))
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadHeader(r, make([]byte, HeaderSize))
		if err != nil || !h.Type.IsData() || h.Length > 1<<16 {
			return
		}
		dst := make([]byte, h.Length)
		if err := RecvData(r, h, dst); err == nil {
			var again bytes.Buffer
			_ = WriteData(&again, h, dst)
			if !bytes.Equal(again.Bytes(), b[:again.Len()]) {
				t.Fatal("accepted a data frame that does not re-encode to its input")
			}
		}
	})
}

// FuzzReadBlock feeds arbitrary bytes after a Block header: the reader
// either refuses them or returns an answer that re-encodes to them.
func FuzzReadBlock(f *testing.F) {
	f.Add(append(BlockHead(Version, 7, 1, BlockAnswer{Found: true, Size: 3, Checksum: 9, Attr: []byte("meta")}), "abc"...))
	f.Add(BlockHead(Version, 7, 1, BlockAnswer{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadHeader(r, make([]byte, HeaderSize))
		if err != nil {
			return
		}
		a, err := ReadBlock(r, h, 7, 1, 1<<20)
		if err != nil {
			return
		}
		if a.Size > 1<<20 || (!a.Found && (a.Size != 0 || a.Attr != nil)) {
			t.Fatalf("answer %+v accepted", a)
		}
		if !a.Found {
			return
		}
		again := BlockHead(h.Version, 7, 1, a)
		if n := HeaderSize + int(h.Length); !bytes.Equal(again, b[:n]) {
			t.Fatalf("answer %+v re-encodes to %x, read from %x", a, again, b[:n])
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	f.Add(make([]byte, 64))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParseKeys(b)
		if err != nil {
			return
		}
		if len(keys) == 0 || len(keys) > MaxGetKeys || !bytes.Equal(AppendKeys(nil, keys), b) {
			t.Fatalf("%d keys from %d bytes", len(keys), len(b))
		}
	})
}
