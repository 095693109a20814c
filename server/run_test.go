package server

import (
	"errors"
	"net"
	"testing"
)

func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitListener(ln, 1)
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	a1, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// The only slot is taken: a second Accept waits, and ends when the
	// listener closes instead of hanging a shutdown.
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	l.Close()
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v", err)
	}
	a1.Close()
}
