package dirlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FileName is the lock file's name inside the directory.
const FileName = "yuebing.lock"

// Options configures Acquire.
type Options struct {
	// Wait bounds how long Acquire waits for a holder to release the lock
	// before it fails with a *HeldError. Zero fails at once if the lock is
	// held.
	Wait time.Duration
	// Poll is how often Acquire tries again while it waits. Default 50ms.
	Poll time.Duration
	// Waiting, if set, is called once when Acquire finds the lock held
	// and starts to wait, with the holder as the lock file names it (for
	// a log line: a start-up that pauses should say why).
	Waiting func(*HeldError)
}

// Lock is a held directory lock. Its methods are safe to call once each
// from one goroutine.
type Lock struct {
	f    *os.File
	path string
}

// Acquire locks dir, which must exist, for this process: at once if no
// other process holds it, else as soon as the holder lets go, waiting at
// most opts.Wait. Giving up, it returns a *HeldError naming the holder;
// ctx ending first returns ctx's error.
func Acquire(ctx context.Context, dir string, opts Options) (*Lock, error) {
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	start := time.Now()
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("dirlock: locking %s: %w", path, err)
		}
		waited := time.Since(start)
		if !told && opts.Waiting != nil && waited < opts.Wait {
			told = true
			pid, cmdline := readHolder(f)
			opts.Waiting(&HeldError{Dir: dir, PID: pid, Cmdline: cmdline, Waited: opts.Wait})
		}
		if waited >= opts.Wait {
			pid, cmdline := readHolder(f)
			f.Close()
			return nil, &HeldError{Dir: dir, PID: pid, Cmdline: cmdline, Waited: opts.Wait}
		}
		t := time.NewTimer(min(opts.Poll, opts.Wait-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if err := writeHolder(f); err != nil {
		f.Close() // closing drops the lock
		return nil, fmt.Errorf("dirlock: recording this process in %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

// Release empties the lock file and lets the lock go. The file stays:
// removing it could let two processes lock two different files of one
// name.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	terr := l.f.Truncate(0)
	cerr := l.f.Close() // drops the flock
	l.f = nil
	if err := errors.Join(terr, cerr); err != nil {
		return fmt.Errorf("dirlock: releasing %s: %w", l.path, err)
	}
	return nil
}

// Path returns the lock file's path.
func (l *Lock) Path() string { return l.path }

// writeHolder records this process in the lock file:
//
//	pid 1234
//	cmdline yuebing serve --data-dir /data
func writeHolder(f *os.File) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pid %d\ncmdline %s\n", os.Getpid(), cmdline())
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(b.Bytes(), 0)
	return err
}

// readHolder parses what the lock's holder recorded; 0 and "" when it has
// recorded nothing readable.
func readHolder(f *os.File) (pid int, cmdline string) {
	var buf [4096]byte
	n, _ := f.ReadAt(buf[:], 0)
	return parseHolder(buf[:n])
}

// parseHolder parses a lock file's contents; unknown or malformed lines
// are ignored, so a torn or foreign file yields 0 and "".
func parseHolder(b []byte) (pid int, cmdline string) {
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				pid = n
			}
		case "cmdline":
			cmdline = v
		}
	}
	return pid, cmdline
}

// cmdline is this process's command line, arguments joined by spaces, on
// one line.
func cmdline() string {
	s := strings.Join(os.Args, " ")
	if b, err := os.ReadFile("/proc/self/cmdline"); err == nil {
		s = strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ")
	}
	return strings.ReplaceAll(s, "\n", " ")
}
