package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
)

// testStore builds a DRAM + SSD hierarchy of the given capacities.
func testStore(t testing.TB, dramCap, ssdCap int64) *tier.Hierarchy {
	t.Helper()
	return openStore(t, t.TempDir(), dramCap, ssdCap)
}

func openStore(t testing.TB, dir string, dramCap, ssdCap int64) *tier.Hierarchy {
	t.Helper()
	d, err := dram.New(dram.Options{Capacity: dramCap})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: dir, Capacity: ssdCap, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// Closing a store mid-demotion logs warnings that say nothing here.
	h, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type testServer struct {
	*Server
	addr  string
	store *tier.Hierarchy
}

// startServer serves opts (with a 64 MiB DRAM + 256 MiB SSD store unless
// opts.Store is set) on 127.0.0.1:0 and shuts it down at cleanup.
func startServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	if opts.Store == nil {
		opts.Store = testStore(t, 64<<20, 256<<20)
		t.Cleanup(func() { opts.Store.Close() })
	}
	opts.EventLoop = opts.EventLoop || *eventLoop
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: s, addr: ln.Addr().String(), store: opts.Store}
}

// rawConn is a client speaking raw bytes.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dial(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReaderSize(nc, 1<<16)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// reply reads one complete RESP reply and returns its raw bytes.
func (c *rawConn) reply() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	if err := readReply(c.br, &b); err != nil {
		c.t.Fatalf("reading a reply: %v (so far %q)", err, b.String())
	}
	return b.String()
}

func readReply(br *bufio.Reader, b *strings.Builder) error {
	line, err := br.ReadString('\n')
	b.WriteString(line)
	if err != nil {
		return err
	}
	if len(line) < 3 {
		return fmt.Errorf("short line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#':
		return nil
	case '$', '=', '!':
		var n int
		fmt.Sscan(body, &n)
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return err
		}
		b.Write(buf)
		return nil
	case '*', '~', '>', '%':
		var n int
		fmt.Sscan(body, &n)
		if line[0] == '%' {
			n *= 2
		}
		for range max(n, 0) {
			if err := readReply(br, b); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown reply type %q", line)
}

// do sends a command as a multibulk request and returns the raw reply.
func (c *rawConn) do(args ...string) string {
	c.t.Helper()
	c.send(multibulk(args...))
	return c.reply()
}

func multibulk(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// closed reports whether the server closed the connection (after any
// replies still buffered).
func (c *rawConn) closed() bool {
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.ReadByte()
	// A close with request bytes still unread makes the kernel reset the
	// connection rather than end it: either way it is closed.
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// tool returns the path of an external program, skipping the test when it
// is not installed.
func tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s): %v", name, pkg, err)
	}
	return p
}

// redisServer starts Debian's redis-server on a free port for differential
// tests, or skips.
func redisServer(t testing.TB) string {
	t.Helper()
	bin := tool(t, "redis-server", "redis-server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "no", "--logfile", filepath.Join(dir, "log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range 200 {
		if nc, err := net.Dial("tcp", addr); err == nil {
			nc.Close()
			return addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	t.Fatalf("redis-server did not start: %s", log)
	return ""
}

func writeTokens(t testing.TB, yaml string) *auth.Tokens {
	t.Helper()
	tok, err := auth.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
