package dirlock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// flock(2) locks belong to an open file, so two Acquires in one process
// exclude each other as two processes do.

func TestAcquireRecordsHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(t.Context(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	want := "pid " + strconv.Itoa(os.Getpid()) + "\ncmdline "
	if !strings.HasPrefix(string(b), want) || !strings.Contains(string(b), filepath.Base(os.Args[0])) {
		t.Fatalf("lock file %q, want %q and the command line", b, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); len(b) != 0 {
		t.Fatalf("lock file after release: %q", b)
	}
	l2, err := Acquire(t.Context(), dir, Options{})
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

func TestHeldNamesHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(t.Context(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	for _, wait := range []time.Duration{0, 30 * time.Millisecond} {
		_, err = Acquire(t.Context(), dir, Options{Wait: wait, Poll: 5 * time.Millisecond})
		var held *HeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrLocked) {
			t.Fatalf("wait %v: second Acquire = %v, want a HeldError", wait, err)
		}
		if held.PID != os.Getpid() || !strings.Contains(held.Cmdline, filepath.Base(os.Args[0])) || held.Dir != dir {
			t.Fatalf("wait %v: %+v does not name this process", wait, held)
		}
		if msg := err.Error(); !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(msg, dir) {
			t.Fatalf("wait %v: message %q names neither pid nor directory", wait, msg)
		}
	}
}

// TestWaitsForHolder: a lock released while Acquire waits is taken.
func TestWaitsForHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l, err := Acquire(t.Context(), dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(3 * time.Second)
			l.Release()
		}()
		start := time.Now()
		var told []*HeldError
		l2, err := Acquire(t.Context(), dir, Options{Wait: 10 * time.Second, Waiting: func(h *HeldError) { told = append(told, h) }})
		if err != nil {
			t.Fatalf("Acquire while the holder lets go = %v", err)
		}
		defer l2.Release()
		if waited := time.Since(start); waited < 3*time.Second || waited >= 10*time.Second {
			t.Fatalf("took the lock after %v, want once it was released at 3s", waited)
		}
		if len(told) != 1 || told[0].PID != os.Getpid() {
			t.Fatalf("Waiting called with %+v, want once, naming this process", told)
		}
	})
}

// TestGivesUpAfterWait: the wait is bounded, and a context ending sooner
// ends it.
func TestGivesUpAfterWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l, err := Acquire(t.Context(), dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		start := time.Now()
		_, err = Acquire(t.Context(), dir, Options{Wait: 10 * time.Second})
		var held *HeldError
		if !errors.As(err, &held) || time.Since(start) != 10*time.Second || held.Waited != 10*time.Second {
			t.Fatalf("Acquire = %v after %v, want a HeldError after 10s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := Acquire(ctx, dir, Options{Wait: time.Minute}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with a 1s context = %v", err)
		}
	})
}

func TestBadDir(t *testing.T) {
	_, err := Acquire(t.Context(), filepath.Join(t.TempDir(), "missing"), Options{})
	if err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("Acquire in a missing directory = %v", err)
	}
}

// TestEmptyLockFile: a holder that has not written itself down yet is
// reported without a pid.
func TestEmptyLockFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Acquire(t.Context(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(0) // the holder's record gone, as before it writes it
	_, err = Acquire(t.Context(), dir, Options{})
	var held *HeldError
	if !errors.As(err, &held) || held.PID != 0 || !strings.Contains(err.Error(), "has not recorded its pid") {
		t.Fatalf("Acquire = %v", err)
	}
	l.Release()
}

func FuzzParseHolder(f *testing.F) {
	f.Add([]byte("pid 1234\ncmdline yuebing serve --data-dir /data\n"))
	f.Add([]byte(""))
	f.Add([]byte("pid -5\ncmdline\n"))
	f.Add([]byte("pid 99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		pid, cmdline := parseHolder(in)
		if pid < 0 || strings.Contains(cmdline, "\n") {
			t.Fatalf("parseHolder(%q) = %d, %q", in, pid, cmdline)
		}
		if pid == 0 {
			return
		}
		// What parses re-parses the same once written back.
		p2, c2 := parseHolder([]byte("pid " + strconv.Itoa(pid) + "\ncmdline " + cmdline + "\n"))
		if p2 != pid || c2 != cmdline {
			t.Fatalf("round trip of %d %q: %d %q", pid, cmdline, p2, c2)
		}
	})
}
