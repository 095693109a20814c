package staging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// FuzzHello: whatever a client sends first on a real connection, the
// server answers one line, a session with its descriptor or an error with
// a code, hangs up on an error, and goes on serving.
func FuzzHello(f *testing.F) {
	f.Add([]byte(`{"token":"t","size":4096}` + "\n"))
	f.Add([]byte(`{"token":"bad","size":4096}` + "\n"))
	f.Add([]byte(`{"token":"t","size":1048577}` + "\n"))
	f.Add([]byte(`{"token":"t","size":4096}`))
	f.Add([]byte(`{"token":"t","size":4096}` + "\n{\"op\":\"get\"}\n"))
	f.Add([]byte("\n"))
	f.Add([]byte{})
	s, err := New(Options{
		Listen:          fmt.Sprintf("@yuebing-staging-fuzz-%d", os.Getpid()),
		MaxSessionBytes: 1 << 20, MaxBytes: 4 << 20, MaxSessions: 4, MaxOwnerSessions: 4, HelloTimeout: time.Second,
		Authenticate: func(tok string) (string, any, error) {
			if tok == "bad" {
				return "", nil, errors.New("unknown token")
			}
			return tok, nil, nil
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	f.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			f.Error(err)
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Addr(), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(data)
		c.CloseWrite() // a request without a newline ends here
		buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatalf("no answer to %q: %v", data, err)
		}
		var fds []int
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				got, _ := unix.ParseUnixRights(&m)
				fds = append(fds, got...)
			}
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		line := buf[:n]
		if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("answer %q to %q: want one line", line, data)
		}
		var a answer
		if err := json.Unmarshal(line, &a); err != nil {
			t.Fatalf("answer %q to %q: %v", line, data, err)
		}
		switch {
		case a.Error != nil:
			if a.Error.Code == "" || len(fds) != 0 {
				t.Fatalf("refusal %q to %q with %d descriptors", line, data, len(fds))
			}
			// ECONNRESET when the server hung up on bytes it did not read.
			if _, err := c.Read(buf); err != io.EOF && !errors.Is(err, unix.ECONNRESET) {
				t.Fatalf("after refusal %q: %v, want EOF", line, err)
			}
		case len(a.Session) != 32 || a.Size <= 0 || a.Size > 1<<20 || len(fds) != 1:
			t.Fatalf("answer %q to %q with %d descriptors", line, data, len(fds))
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("Serve returned: %v", err)
		default:
		}
	})
}
