package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status for the server: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest) // "123456 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				t.Fatalf("%s: unexpected %q", field, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// patternReader yields n bytes of a repeating pattern, so a test can send
// a value of hundreds of MiB without holding it.
type patternReader struct {
	pat []byte
	off int
	n   int64
}

func newPatternReader(seed int, n int64) *patternReader {
	return &patternReader{pat: testData(seed, 64<<10), n: n}
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	k := 0
	for k < len(p) {
		c := copy(p[k:], r.pat[r.off:])
		k += c
		r.off = (r.off + c) % len(r.pat)
	}
	r.n -= int64(k)
	return k, nil
}

// respSetHeader is a SET of key up to its value's bytes.
func respSetHeader(key string, size int64) string {
	return fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(key), key, size)
}

// respCommand encodes a command as a multibulk request.
func respCommand(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func respLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	return strings.TrimSuffix(line, "\r\n")
}

// respInfo returns the fields of INFO memory.
func respInfo(t *testing.T, c net.Conn, r *bufio.Reader) map[string]string {
	t.Helper()
	io.WriteString(c, respCommand("INFO", "memory"))
	head := respLine(t, r)
	n, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
	if err != nil {
		t.Fatalf("INFO reply %q", head)
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(string(body), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// TestRESPInflightBudget: sixteen clients SET 200 MiB values at once into
// a node whose tiers are far smaller. Values bound for the SSD tier sit in
// the heap until stored, so the Redis front end charges them to
// limits.max_inflight_bytes: those it cannot admit within the wait are
// refused with an error naming the limit, their bytes read and discarded,
// and the server's peak RSS stays within DRAM + the budget + 1 GiB of
// runtime slack. The server still answers, the connection of a refused SET
// stays usable, and data stored before is intact.
func TestRESPInflightBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 3 GiB through the server")
	}
	const (
		dram     = 128 << 20
		inflight = 512 << 20
		huge     = 200 << 20
		clients  = 16
	)
	n := serve(t, t.TempDir(), "--resp-listen", "127.0.0.1:0", "--dram-capacity", "128MiB",
		"--ssd-capacity", "512MiB", "--max-inflight-bytes", "512MiB", "--log-level", "warn")
	pid := n.cmd.Process.Pid

	ctl, ctlr := dialRESP(t, n.resp)
	defer ctl.Close()
	ctl.SetDeadline(time.Now().Add(10 * time.Minute))
	before := string(testData(7, 1<<20))
	io.WriteString(ctl, respCommand("SET", "before", before))
	if got := respLine(t, ctlr); got != "+OK" {
		t.Fatalf("SET before = %q", got)
	}

	replies := make([]string, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", n.resp, 10*time.Second)
			if err != nil {
				replies[i] = err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Minute))
			w := bufio.NewWriterSize(c, 256<<10)
			io.WriteString(w, respSetHeader(fmt.Sprintf("huge%d", i), huge))
			io.Copy(w, newPatternReader(i, huge))
			io.WriteString(w, "\r\n")
			if err := w.Flush(); err != nil {
				replies[i] = "write: " + err.Error()
				return
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				replies[i] = "read: " + err.Error()
				return
			}
			replies[i] = strings.TrimSuffix(line, "\r\n")
		})
	}
	wg.Wait()
	var stored []int
	for i, r := range replies {
		switch {
		case r == "+OK":
			stored = append(stored, i)
		case strings.HasPrefix(r, "-ERR ") && strings.Contains(r, "limits.max_inflight_bytes"):
		default:
			t.Errorf("SET huge%d: %q, want +OK or -ERR naming limits.max_inflight_bytes", i, r)
		}
	}
	t.Logf("%d of %d SETs of %d MiB stored, the rest refused", len(stored), clients, huge>>20)
	checkPeak := func() {
		t.Helper()
		hwm := procStatus(t, pid, "VmHWM")
		t.Logf("peak RSS %d MiB, bound %d MiB", hwm>>20, (dram+inflight+1<<30)>>20)
		if hwm > dram+inflight+1<<30 {
			t.Errorf("peak RSS %d MiB exceeds DRAM %d MiB + in-flight budget %d MiB + 1 GiB", hwm>>20, dram>>20, inflight>>20)
		}
	}
	checkPeak()

	// Two SETs stalled mid-value hold 400 MiB of the budget; a third
	// cannot be admitted, whatever the timing.
	for i := range 2 {
		c, _ := dialRESP(t, n.resp)
		defer c.Close()
		io.WriteString(c, respSetHeader(fmt.Sprintf("stalled%d", i), huge)+"x")
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if v, _ := strconv.ParseInt(respInfo(t, ctl, ctlr)["inflight_bytes"], 10, 64); v >= 2*huge {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stalled SETs were not admitted: %v", respInfo(t, ctl, ctlr))
		}
	}
	c, r := dialRESP(t, n.resp)
	defer c.Close()
	go func() {
		w := bufio.NewWriterSize(c, 256<<10)
		io.WriteString(w, respSetHeader("refused", huge))
		io.Copy(w, newPatternReader(99, huge))
		io.WriteString(w, "\r\n"+respCommand("PING"))
		w.Flush()
	}()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	if got := respLine(t, r); !strings.HasPrefix(got, "-ERR ") || !strings.Contains(got, "limits.max_inflight_bytes") {
		t.Fatalf("SET while the budget is held = %q, want -ERR naming limits.max_inflight_bytes", got)
	}
	if got := respLine(t, r); got != "+PONG" {
		t.Fatalf("PING after the refused SET on its connection = %q", got)
	}
	info := respInfo(t, ctl, ctlr)
	if info["inflight_capacity_bytes"] != strconv.Itoa(inflight) || info["inflight_rejections"] == "0" || info["inflight_rejections"] == "" {
		t.Fatalf("INFO memory: capacity %q rejections %q", info["inflight_capacity_bytes"], info["inflight_rejections"])
	}
	checkPeak()

	io.WriteString(ctl, respCommand("PING"))
	if got := respLine(t, ctlr); got != "+PONG" {
		t.Fatalf("PING = %q", got)
	}
	io.WriteString(ctl, respCommand("GET", "before"))
	if got := respLine(t, ctlr); got != fmt.Sprintf("$%d", len(before)) {
		t.Fatalf("GET before: %q", got)
	}
	got := make([]byte, len(before)+2)
	if _, err := io.ReadFull(ctlr, got); err != nil || string(got[:len(before)]) != before {
		t.Fatalf("GET before: the value changed (%v)", err)
	}
	for _, i := range stored {
		io.WriteString(ctl, respCommand("STRLEN", fmt.Sprintf("huge%d", i)))
		// A stored value may since have been evicted by a later one: the
		// SSD tier holds two.
		if got := respLine(t, ctlr); got != ":"+strconv.Itoa(huge) && got != ":0" {
			t.Fatalf("STRLEN huge%d = %q", i, got)
		}
	}

	resp, err := http.Get(n.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"yuebing_inflight_capacity_bytes 5.36870912e+08",
		`yuebing_inflight_rejections_total{front_end="resp"}`,
		`yuebing_inflight_waits_total{front_end="http"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	n.stop(t, syscall.SIGTERM)
}

// TestIdleRSS: a node with the default 4 GiB arena and no prefault asked
// for commits no arena memory while idle: its RSS stays small.
func TestIdleRSS(t *testing.T) {
	n := serve(t, t.TempDir(), "--dram-capacity", "4GiB", "--resp-listen", "127.0.0.1:0", "--log-level", "warn")
	// Long enough for a background prefault to have populated gigabytes,
	// were one running.
	time.Sleep(2 * time.Second)
	rss := procStatus(t, n.cmd.Process.Pid, "VmRSS")
	t.Logf("idle RSS %d MiB with a 4 GiB arena", rss>>20)
	if rss >= 200<<20 {
		t.Fatalf("idle RSS %d MiB, want under 200 MiB", rss>>20)
	}
	n.stop(t, syscall.SIGTERM)
}
