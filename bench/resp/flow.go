package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultFlowChunkBytes is one LMCache chunk of 256 tokens of a 7B-class
// model with grouped-query attention (Mistral-7B's and Llama-3-8B's shape:
// 32 layers, 8 KV heads of dimension 128, fp16): 256 x 2 x 32 x 8 x 128 x 2
// bytes, 32 MiB.
const DefaultFlowChunkBytes = 32 << 20

// QuickFlowChunkBytes is the chunk size under Quick.
const QuickFlowChunkBytes = 256 << 10

// flowMetadata stands in for LMCache's metadata value, 28 bytes.
var flowMetadata = []byte("lmcache-metadata-28-bytes-xx")

// runFlow drives LMCache's redis:// connector's two-key flow against addr
// over conns connections: per chunk SET <k>kv_bytes and SET <k>metadata,
// then EXISTS <k>metadata, GET <k>metadata and GET <k>kv_bytes, the store
// and the retrieve of one chunk. Each connection reuses its own key, so the
// servers hold conns chunks. It returns chunks per second.
func runFlow(ctx context.Context, addr string, conns, chunks int, value []byte) (float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conns)
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = flowConn(ctx, addr, fmt.Sprintf("yb-bench-flow-%d@", i), &next, int64(chunks), value)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(chunks) / elapsed.Seconds(), nil
}

func flowConn(ctx context.Context, addr, key string, next *atomic.Int64, chunks int64, value []byte) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	w := bufio.NewWriterSize(c, 64<<10)
	r := bufio.NewReaderSize(c, 64<<10)
	kv, meta := key+"kv_bytes", key+"metadata"
	for next.Add(1) <= chunks {
		writeCmd(w, []byte("SET"), []byte(kv), value)
		writeCmd(w, []byte("SET"), []byte(meta), flowMetadata)
		if err := w.Flush(); err != nil {
			return err
		}
		for range 2 {
			if _, err := readReply(r); err != nil {
				return err
			}
		}
		writeCmd(w, []byte("EXISTS"), []byte(meta))
		if err := w.Flush(); err != nil {
			return err
		}
		if n, err := readReply(r); err != nil || n != 1 {
			return fmt.Errorf("EXISTS %s: %d, %v", meta, n, err)
		}
		writeCmd(w, []byte("GET"), []byte(meta))
		writeCmd(w, []byte("GET"), []byte(kv))
		if err := w.Flush(); err != nil {
			return err
		}
		for _, want := range []int{len(flowMetadata), len(value)} {
			if n, err := readReply(r); err != nil || n != int64(want) {
				return fmt.Errorf("GET: %d bytes, want %d: %v", n, want, err)
			}
		}
	}
	return nil
}

func writeCmd(w *bufio.Writer, args ...[]byte) {
	w.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		w.WriteString("$" + strconv.Itoa(len(a)) + "\r\n")
		w.Write(a)
		w.WriteString("\r\n")
	}
}

// readReply reads one reply: an integer's value, a bulk string's length
// (discarded), 0 for a simple string; an error reply or a nil is an error.
func readReply(r *bufio.Reader) (int64, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 3 {
		return 0, fmt.Errorf("bad reply %q", line)
	}
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+':
		return 0, nil
	case '-':
		return 0, errors.New(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bulk reply %q", body)
		}
		if _, err := io.CopyN(io.Discard, r, n+2); err != nil {
			return 0, err
		}
		return n, nil
	}
	return 0, fmt.Errorf("bad reply %q", line)
}
