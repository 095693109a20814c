// Package s3test starts a real S3-compatible server for tests: versitygw
// serving a temporary directory on 127.0.0.1 (package versitygw, with the
// test's cleanup), and a fault-injecting proxy in front of it for outages,
// slowness, 5xx and 403 answers.
//
//	srv := s3test.Start(t) // skips the test when versitygw is not installed
//	tr, err := s3.Open(ctx, s3.Options{Endpoint: srv.Endpoint, Bucket: srv.Bucket,
//		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Capacity: 1 << 30})
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/yuebing/yuebing/tier/s3/versitygw"
)

// Binary returns the path of versitygw, or "" (versitygw.Binary).
func Binary() string { return versitygw.Binary() }

// Server is a running versitygw with one bucket.
type Server struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Bucket    string
	Dir       string // the directory it serves; the bucket is Dir/Bucket

	t  testing.TB
	gw *versitygw.Server
}

// Start runs versitygw on a free port of 127.0.0.1 over a temporary
// directory and creates a bucket. It skips the test when versitygw is
// missing, and stops the server at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	if Binary() == "" {
		t.Skip(versitygw.ErrNotInstalled)
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gw, err := versitygw.Start(ctx, versitygw.Options{Dir: t.TempDir(), AccessKey: "yuebing-test", SecretKey: "yuebing-test-secret", Log: logf})
	if err != nil {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("s3test: %v: %s", err, b)
	}
	t.Cleanup(gw.Stop)
	return &Server{Endpoint: gw.Endpoint, AccessKey: gw.AccessKey, SecretKey: gw.SecretKey, Bucket: gw.Bucket, Dir: gw.Dir, t: t, gw: gw}
}

// Stop kills the server (as an outage would); Restart brings it back on the
// same address and directory.
func (s *Server) Stop() { s.gw.Stop() }

// Restart starts a stopped server again.
func (s *Server) Restart() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.gw.Restart(ctx); err != nil {
		s.t.Fatalf("s3test: %v", err)
	}
}

// Client returns a client of the server with its credentials.
func (s *Server) Client() *minio.Client {
	cl, err := s.gw.Client()
	if err != nil {
		s.t.Fatal(err)
	}
	return cl
}

// Fault is what a Proxy does to each request.
type Fault int32

const (
	Pass      Fault = iota // forward
	Fail5xx                // answer 503 SlowDown
	Forbidden              // answer 403 AccessDenied
	Slow                   // forward after Proxy.Delay
	Down                   // close the connection without answering
)

// Proxy forwards to a Server and injects faults.
type Proxy struct {
	Endpoint string // host:port to give the tier
	Delay    time.Duration
	fault    atomic.Int32
	requests atomic.Int64
}

// NewProxy starts a fault-injecting proxy in front of s on 127.0.0.1.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: s.Endpoint}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &Proxy{Delay: 2 * time.Second}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Endpoint = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		switch Fault(p.fault.Load()) {
		case Fail5xx:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>`)
			return
		case Forbidden:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>injected</Message></Error>`)
			return
		case Down:
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		case Slow:
			select {
			case <-time.After(p.Delay):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return p
}

// Set changes the fault for the requests that follow.
func (p *Proxy) Set(f Fault) { p.fault.Store(int32(f)) }

// Requests counts the requests the proxy received.
func (p *Proxy) Requests() int64 { return p.requests.Load() }
