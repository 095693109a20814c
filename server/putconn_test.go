package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// putConnNode serves an API the way a node does: net/http with the put
// connections in front.
type putConnNode struct {
	api  *API
	puts *putConns
	addr string
}

func startPutConnNode(t *testing.T) *putConnNode {
	t.Helper()
	dir := t.TempDir()
	store := newTestStore(t, dir, 32<<20)
	api, err := NewAPI(APIOptions{Store: store, ContextsFile: filepath.Join(dir, "contexts.json")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 8 << 10}
	puts := newPutConns(srv)
	done := make(chan error, 1)
	go func() { done <- puts.serve(ln) }()
	t.Cleanup(func() {
		puts.close()
		<-done
		api.Close()
		store.Close()
	})
	return &putConnNode{api: api, puts: puts, addr: ln.Addr().String()}
}

func putHead(name string, n int, extra string) string {
	return "PUT /v1/objects/" + name + " HTTP/1.1\r\nHost: t\r\nX-Yuebing-Namespace: " + nsAlpha +
		"\r\nContent-Length: " + strconv.Itoa(n) + "\r\n" + extra + "\r\n"
}

func readAnswer(t *testing.T, br *bufio.Reader) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, body
}

// getObject reads an object over a new connection: 0 and nil if missing.
func (n *putConnNode) getObject(t *testing.T, name string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.addr+"/v1/objects/"+name, nil)
	req.Header.Set(HeaderNamespace, nsAlpha)
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestPutConnMixed sends puts and other requests on one connection: puts
// are served on the taken-over connection, the first other request goes
// back to net/http with the bytes already read, and a put after it takes
// the connection over again.
func TestPutConnMixed(t *testing.T) {
	n := startPutConnNode(t)
	conn, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	datas := map[string][]byte{}
	put := func(name string, size int, status int) {
		t.Helper()
		data := payload(uint64(len(name)+size), size)
		datas[name] = data
		if _, err := (&net.Buffers{[]byte(putHead(name, size, "")), data}).WriteTo(conn); err != nil {
			t.Fatal(err)
		}
		resp, body := readAnswer(t, br)
		if resp.StatusCode != status || resp.Close {
			t.Fatalf("put %s: %d %s (close %v), want %d", name, resp.StatusCode, body, resp.Close, status)
		}
		if want := fmt.Sprintf(`"size":%d`, size); !strings.Contains(string(body), want) {
			t.Fatalf("put %s answered %s, want %s", name, body, want)
		}
	}
	put("a", 1<<20, http.StatusCreated)
	put("b", 100, http.StatusCreated)
	put("b", 100, http.StatusOK) // stored already: the unread body is dropped
	// A GET and a put sent together: the GET goes back to net/http with
	// the put's bytes read behind it.
	get := "GET /v1/objects/b HTTP/1.1\r\nHost: t\r\nX-Yuebing-Namespace: " + nsAlpha + "\r\n\r\n"
	c := payload(3, 5000)
	datas["c"] = c
	if _, err := (&net.Buffers{[]byte(get), []byte(putHead("c", len(c), "")), c}).WriteTo(conn); err != nil {
		t.Fatal(err)
	}
	resp, body := readAnswer(t, br)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, datas["b"]) {
		t.Fatalf("GET b: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, body = readAnswer(t, br); resp.StatusCode != http.StatusCreated {
		t.Fatalf("put c after the GET: %d %s", resp.StatusCode, body)
	}
	put("d", 70000, http.StatusCreated)
	// Taken over again after the hand-back, the connection is the socket
	// itself, not the hand-back's wrapper, so its reads and writes are the
	// raw ones again.
	n.puts.mu.Lock()
	for c := range n.puts.mu.conns {
		if _, ok := c.(*net.TCPConn); !ok {
			t.Errorf("a put connection served as a %T", c)
		}
	}
	if len(n.puts.mu.conns) != 1 {
		t.Errorf("%d put connections, want 1", len(n.puts.mu.conns))
	}
	n.puts.mu.Unlock()
	// A chunked put on the taken-over connection, sized by X-Yuebing-Size.
	e := payload(5, 3000)
	head := "PUT /v1/objects/e HTTP/1.1\r\nHost: t\r\nX-Yuebing-Namespace: " + nsAlpha +
		"\r\nTransfer-Encoding: chunked\r\nX-Yuebing-Size: 3000\r\n\r\n"
	chunks := fmt.Sprintf("%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", 1000, e[:1000], 2000, e[1000:])
	if _, err := io.WriteString(conn, head+chunks); err != nil {
		t.Fatal(err)
	}
	if resp, body = readAnswer(t, br); resp.StatusCode != http.StatusCreated {
		t.Fatalf("chunked put: %d %s", resp.StatusCode, body)
	}
	datas["e"] = e
	for name, want := range datas {
		if st, got := n.getObject(t, name); st != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("GET %s: %d, %d bytes, want %d", name, st, len(got), len(want))
		}
	}
}

// TestPutConnBadBodies: a body that ends early or runs past its length
// gets a clear error and stores nothing half.
func TestPutConnBadBodies(t *testing.T) {
	n := startPutConnNode(t)
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn, bufio.NewReader(conn)
	}

	t.Run("closed mid-body", func(t *testing.T) {
		for _, first := range []bool{true, false} {
			conn, br := dial()
			if !first { // the second put of the connection: served by the loop
				if _, err := io.WriteString(conn, putHead("ok", 4, "")+"abcd"); err != nil {
					t.Fatal(err)
				}
				if resp, _ := readAnswer(t, br); resp.StatusCode/100 != 2 {
					t.Fatalf("first put: %d", resp.StatusCode)
				}
			}
			name := fmt.Sprintf("half-%v", first)
			if _, err := io.WriteString(conn, putHead(name, 1<<20, "")+strings.Repeat("x", 300<<10)); err != nil {
				t.Fatal(err)
			}
			conn.(*net.TCPConn).CloseWrite()
			// The node answers 400 (the client may no longer read it) or
			// just closes; what matters is that nothing is stored.
			if resp, err := http.ReadResponse(br, nil); err == nil && resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s: answered %d, want 400", name, resp.StatusCode)
			}
			if st, _ := n.getObject(t, name); st != http.StatusNotFound {
				t.Fatalf("%s: GET answered %d after a short body, want 404", name, st)
			}
		}
	})

	t.Run("longer than declared", func(t *testing.T) {
		conn, br := dial()
		// 10 bytes declared, 20 sent: the rest is read as the next
		// request, which is malformed.
		if _, err := io.WriteString(conn, putHead("long", 10, "")+"0123456789garbage!\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if resp, body := readAnswer(t, br); resp.StatusCode != http.StatusCreated {
			t.Fatalf("put: %d %s", resp.StatusCode, body)
		}
		resp, _ := readAnswer(t, br)
		if resp.StatusCode != http.StatusBadRequest || !resp.Close {
			t.Fatalf("the bytes past the body: %d (close %v), want 400 and close", resp.StatusCode, resp.Close)
		}
		if st, got := n.getObject(t, "long"); st != http.StatusOK || string(got) != "0123456789" {
			t.Fatalf("GET long: %d %q", st, got)
		}
	})

	t.Run("slow body", func(t *testing.T) {
		conn, br := dial()
		data := payload(9, 64<<10)
		io.WriteString(conn, putHead("slow", len(data), ""))
		for i := 0; i < len(data); i += 16 << 10 {
			time.Sleep(20 * time.Millisecond)
			if _, err := conn.Write(data[i : i+16<<10]); err != nil {
				t.Fatal(err)
			}
		}
		if resp, body := readAnswer(t, br); resp.StatusCode != http.StatusCreated {
			t.Fatalf("slow put: %d %s", resp.StatusCode, body)
		}
		if st, got := n.getObject(t, "slow"); st != http.StatusOK || !bytes.Equal(got, data) {
			t.Fatalf("GET slow: %d, %d bytes", st, len(got))
		}
	})

	t.Run("refused before the body", func(t *testing.T) {
		for _, first := range []bool{true, false} {
			conn, br := dial()
			if !first {
				io.WriteString(conn, putHead("ok2", 4, "")+"abcd")
				if resp, _ := readAnswer(t, br); resp.StatusCode/100 != 2 {
					t.Fatalf("first put: %d", resp.StatusCode)
				}
			}
			// No namespace: refused from the head. The node answers, and
			// closes rather than read a 4 MiB body it will not store.
			head := "PUT /v1/objects/nons HTTP/1.1\r\nHost: t\r\nContent-Length: " + strconv.Itoa(4<<20) + "\r\n\r\n"
			go (&net.Buffers{[]byte(head), make([]byte, 4<<20)}).WriteTo(conn)
			resp, body := readAnswer(t, br)
			if resp.StatusCode != http.StatusBadRequest || !resp.Close || !strings.Contains(string(body), "amespace") {
				t.Fatalf("put without a namespace: %d (close %v) %s", resp.StatusCode, resp.Close, body)
			}
		}
	})

	t.Run("head too large", func(t *testing.T) {
		conn, br := dial()
		io.WriteString(conn, putHead("ok3", 4, "")+"abcd")
		if resp, _ := readAnswer(t, br); resp.StatusCode/100 != 2 {
			t.Fatalf("first put: %d", resp.StatusCode)
		}
		go io.WriteString(conn, putHead("big", 4, "X-Pad: "+strings.Repeat("p", 64<<10)+"\r\n")+"abcd")
		resp, _ := readAnswer(t, br)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !resp.Close {
			t.Fatalf("a 64 KiB head: %d (close %v), want 431 and close", resp.StatusCode, resp.Close)
		}
	})
}

// TestPutConnShutdown: a graceful shutdown closes an idle put connection
// and returns.
func TestPutConnShutdown(t *testing.T) {
	n := startPutConnNode(t)
	conn, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	io.WriteString(conn, putHead("x", 4, "")+"abcd")
	if resp, _ := readAnswer(t, br); resp.StatusCode != http.StatusCreated {
		t.Fatalf("put: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := n.puts.shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle put connection after shutdown: read %v, want EOF", err)
	}
}

// TestPutConnExpectContinue: on the taken-over connection a put that asks
// for 100-continue is told to go on before its body is read (the interim
// answer and the final one both written by the loop), and one with an
// Expect the node does not know is refused with 417 and a close.
func TestPutConnExpectContinue(t *testing.T) {
	n := startPutConnNode(t)
	conn, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	io.WriteString(conn, putHead("first", 4, "")+"abcd")
	if resp, _ := readAnswer(t, br); resp.StatusCode != http.StatusCreated {
		t.Fatalf("first put: %d", resp.StatusCode)
	}
	data := payload(11, 200<<10)
	io.WriteString(conn, putHead("cont", len(data), "Expect: 100-continue\r\n"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("before the body: %q, %v; want 100 Continue", line, err)
	}
	if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	conn.Write(data)
	if resp, body := readAnswer(t, br); resp.StatusCode != http.StatusCreated || resp.Close {
		t.Fatalf("put after 100 Continue: %d (close %v) %s", resp.StatusCode, resp.Close, body)
	}
	if st, got := n.getObject(t, "cont"); st != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("GET cont: %d, %d bytes", st, len(got))
	}
	io.WriteString(conn, putHead("odd", 4, "Expect: teapot\r\n")+"abcd")
	resp, _ := readAnswer(t, br)
	if resp.StatusCode != http.StatusExpectationFailed || !resp.Close {
		t.Fatalf("an unknown Expect: %d (close %v), want 417 and close", resp.StatusCode, resp.Close)
	}
	if st, _ := n.getObject(t, "odd"); st != http.StatusNotFound {
		t.Fatalf("GET odd: %d, want 404", st)
	}
}
