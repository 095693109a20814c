// Package s3test starts a real S3-compatible server for tests: versitygw
// serving a temporary directory on 127.0.0.1, and a fault-injecting proxy in
// front of it for outages, slowness, 5xx and 403 answers.
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
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Binary returns the path of versitygw: on PATH, else in $(go env GOPATH)/bin
// (where .ci/run installs it), else "".
func Binary() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = string(trimNL(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Server is a running versitygw with one bucket.
type Server struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Bucket    string
	Dir       string // the directory it serves; the bucket is Dir/Bucket

	t    testing.TB
	bin  string
	addr string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Start runs versitygw on a free port of 127.0.0.1 over a temporary
// directory and creates a bucket. It skips the test when versitygw is
// missing, and stops the server at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		t.Skip("versitygw not installed (go install github.com/versity/versitygw/cmd/versitygw@latest; .ci/run does it)")
	}
	s := &Server{t: t, bin: bin, AccessKey: "yuebing-test", SecretKey: "yuebing-test-secret", Bucket: "yuebing", Dir: t.TempDir()}
	s.addr = freeAddr(t)
	s.Endpoint = s.addr
	s.start()
	t.Cleanup(s.Stop)
	cl := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("s3test: creating bucket: %v", err)
	}
	return s
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (s *Server) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", s.addr, "--quiet", "posix", s.Dir)
	logf, err := os.Create(filepath.Join(s.t.TempDir(), "versitygw.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("s3test: starting versitygw: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			s.t.Fatalf("s3test: versitygw did not listen on %s: %s", s.addr, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (as an outage would); Restart brings it back on the
// same address and directory.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// Restart starts a stopped server again.
func (s *Server) Restart() { s.start() }

// Client returns a client of the server with its credentials.
func (s *Server) Client() *minio.Client {
	cl, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
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
