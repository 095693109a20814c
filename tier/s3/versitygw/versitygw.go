// Package versitygw runs versitygw, an S3 gateway over a local directory,
// as a child process on 127.0.0.1 with one bucket: the real S3 server that
// the S3 tier's tests (package s3test) and `yuebing bench soak --s3` put
// the tier against, killed and restarted to stage an outage.
//
//	gw, err := versitygw.Start(ctx, versitygw.Options{Dir: dir})
//	defer gw.Stop()
//	tr, err := s3.Open(ctx, s3.Options{Endpoint: gw.Endpoint, Bucket: gw.Bucket,
//		AccessKeyID: gw.AccessKey, SecretAccessKey: gw.SecretKey, Capacity: 1 << 30})
//
// It is not for production: the gateway serves plain HTTP.
package versitygw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ErrNotInstalled: no versitygw binary was found.
var ErrNotInstalled = errors.New("versitygw: not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0; .ci/run does it)")

// Binary returns the path of versitygw: on PATH, else in $(go env GOPATH)/bin
// (where .ci/run installs it), else "".
func Binary() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
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

// Options configure Start.
type Options struct {
	// Binary is versitygw. Default Binary().
	Binary string
	// Dir is the directory the gateway serves; the bucket is Dir/Bucket.
	// Required.
	Dir string
	// Bucket is created at the first start. Default "yuebing".
	Bucket string
	// AccessKey and SecretKey are the gateway's root credentials. Default
	// random ones. They reach the gateway in its environment, not on its
	// command line, where any user's ps would show them.
	AccessKey, SecretKey string
	// Log receives the gateway's output. Default discarded.
	Log io.Writer
	// StartFor bounds the wait for the gateway to listen. Default 30s.
	StartFor time.Duration
}

// Server is a running versitygw. Its methods are safe for concurrent use.
type Server struct {
	Endpoint  string // host:port on 127.0.0.1
	AccessKey string
	SecretKey string
	Bucket    string
	Dir       string

	opts Options
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs versitygw on a free port of 127.0.0.1 and creates the bucket.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Binary == "" {
		o.Binary = Binary()
	}
	if o.Binary == "" {
		return nil, ErrNotInstalled
	}
	if o.Dir == "" {
		return nil, errors.New("versitygw: a directory to serve is required")
	}
	if o.Bucket == "" {
		o.Bucket = "yuebing"
	}
	if o.AccessKey == "" {
		o.AccessKey, o.SecretKey = randomHex(10), randomHex(20)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.StartFor == 0 {
		o.StartFor = 30 * time.Second
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("versitygw: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("versitygw: finding a free port: %w", err)
	}
	s := &Server{Endpoint: l.Addr().String(), AccessKey: o.AccessKey, SecretKey: o.SecretKey, Bucket: o.Bucket, Dir: o.Dir, opts: o}
	l.Close()
	if err := s.Restart(ctx); err != nil {
		return nil, err
	}
	cl, err := s.Client()
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = cl.MakeBucket(cctx, s.Bucket, minio.MakeBucketOptions{})
		cancel()
	}
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("versitygw: creating bucket %q: %w", s.Bucket, err)
	}
	return s, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Restart starts a stopped server again on the same address and directory,
// and waits until it accepts connections.
func (s *Server) Restart(ctx context.Context) error {
	cmd := exec.Command(s.opts.Binary, "--port", s.Endpoint, "--quiet", "posix", s.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = s.opts.Log, s.opts.Log
	// The gateway must not outlive a soak or test killed with SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("versitygw: starting %s: %w", s.opts.Binary, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(s.opts.StartFor)
	for {
		c, err := net.DialTimeout("tcp", s.Endpoint, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("versitygw: exited before listening on %s", s.Endpoint)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return fmt.Errorf("versitygw: not listening on %s within %s", s.Endpoint, s.opts.StartFor)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server with SIGKILL, as an outage would, and waits for it
// to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
}

// Client returns a client of the server with its credentials.
func (s *Server) Client() (*minio.Client, error) {
	return minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
}
