package wire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/yuebing/yuebing/rdma"
)

func TestAcceptLimitsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	slots := make(chan struct{}, 1)
	accepted := make(chan net.Conn)
	go func() {
		for {
			nc := Accept(ctx, ln, slots, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if nc == nil {
				close(accepted)
				return
			}
			accepted <- nc
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	dial()
	first := <-accepted
	defer first.Close()

	// The only slot is taken: the next client is told why and closed.
	c := dial()
	buf := make([]byte, HeaderSize)
	h, err := ReadHeader(c, buf)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := ReadControl(c, h, MaxMessage)
	if err != nil {
		t.Fatal(err)
	}
	if h.Type != Error || !errors.Is(PeerError(h, msg), rdma.ErrBusy) {
		t.Fatalf("over the limit: %v frame, %v", h.Type, PeerError(h, msg))
	}

	// A freed slot admits the next one.
	<-slots
	dial()
	(<-accepted).Close()

	cancel()
	ln.Close()
	if _, ok := <-accepted; ok {
		t.Fatal("Accept returned a connection after its context ended")
	}
}
