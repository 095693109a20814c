package staging

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzReadHello: any bytes a client sends first are either a valid
// request with a size in bounds or ErrBadHello; never a panic.
func FuzzReadHello(f *testing.F) {
	f.Add([]byte(`{"token":"t","size":4096}` + "\n"))
	f.Add([]byte(`{"size":0}` + "\n"))
	f.Add([]byte(`{"token":"t","size":1e30}` + "\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readHello(bytes.NewReader(data), 1<<20)
		if err != nil {
			if !errors.Is(err, ErrBadHello) {
				t.Fatalf("error %v does not wrap ErrBadHello", err)
			}
			return
		}
		if h.Size <= 0 || h.Size > 1<<20 {
			t.Fatalf("accepted size %d", h.Size)
		}
	})
}
