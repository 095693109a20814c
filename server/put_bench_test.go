package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/ssd"
)

// BenchmarkPutSocket stores blocks the way the Python client's socket path
// does (one keep-alive connection, a request head, then the body straight
// from a buffer) beside a raw loopback sink that reads the same bytes into
// one buffer and answers one byte: the put path's cost over the socket's.
//
// The arena modes say where a put's bytes land: "reuse" deletes each block
// after its put, so the next one lands in the same warm pages (a full
// node, where a put takes an evicted block's room); "fresh" keeps every
// block in a prefaulted arena, so each put writes memory not touched since
// start-up; "cold" does the same without the prefault, so each put also
// takes the page faults of a first write (a new node's first fill).
// "reuse-nethttp" is "reuse" served by net/http alone, without the put
// connections the node serves puts on (putconn.go).
func BenchmarkPutSocket(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
		for _, mode := range []string{"reuse", "reuse-nethttp", "fresh", "cold"} {
			b.Run(fmt.Sprintf("size=%dKiB/yuebing-%s", size>>10, mode), func(b *testing.B) { benchPutSocket(b, size, mode) })
		}
		b.Run(fmt.Sprintf("size=%dKiB/raw", size>>10), func(b *testing.B) { benchRawSink(b, size) })
	}
}

func benchPutSocket(b *testing.B, size int, mode string) {
	// Room for the run's blocks when they are kept: 100 calls of 4 MiB
	// (-benchtime 100x); a longer run evicts to the SSD tier.
	capacity := int64(64 << 20)
	reuse := strings.HasPrefix(mode, "reuse")
	if !reuse {
		capacity = 512 << 20
	}
	d, err := dram.New(dram.Options{Capacity: capacity, Prefault: mode == "fresh"})
	if err != nil {
		b.Fatal(err)
	}
	s, err := ssd.Open(ssd.Options{Dir: filepath.Join(b.TempDir(), "ssd"), Capacity: 64 << 20, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	store, err := tier.NewHierarchy([]tier.Tier{d, s}, tier.HierarchyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	api, err := NewAPI(APIOptions{Store: store, ContextsFile: filepath.Join(b.TempDir(), "contexts.json")})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler()}
	serve := srv.Serve
	if mode != "reuse-nethttp" {
		serve = newPutConns(srv).serve
	}
	go serve(ln)
	b.Cleanup(func() {
		srv.Close()
		api.Close()
		store.Close()
	})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	data := payload(1, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name := "put-" + strconv.Itoa(i)
		i++
		head := "PUT /v1/objects/" + name + " HTTP/1.1\r\nHost: bench\r\nX-Yuebing-Namespace: " + nsAlpha +
			"\r\nContent-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"
		if _, err := (&net.Buffers{[]byte(head), data}).WriteTo(conn); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", resp.StatusCode)
		}
		if reuse {
			if err := store.Delete(block.OpaqueKey(nsAlpha, []byte(name))); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchRawSink is the baseline: the same bytes over loopback TCP into one
// reused buffer, acknowledged with one byte.
func benchRawSink(b *testing.B, size int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write([]byte{'k'}); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	data := payload(1, size)
	ack := make([]byte, 1)
	b.SetBytes(int64(size))
	for b.Loop() {
		if _, err := conn.Write(data); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, ack); err != nil {
			b.Fatal(err)
		}
	}
}
