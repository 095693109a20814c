package resp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Real clients from Debian's packages: redis-cli and redis-benchmark
// (redis-tools) and redis-py (python3-redis). Each test skips when its
// client is not installed.

func hostPort(t testing.TB, addr string) (string, string) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

func runTool(t testing.TB, stdin []byte, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\nstdout: %s\nstderr: %s", name, args, err, out.String(), errb.String())
	}
	if errb.Len() > 0 {
		t.Logf("%s stderr: %s", name, errb.String())
	}
	return out.String()
}

func TestRedisCLI(t *testing.T) {
	cli := tool(t, "redis-cli", "redis-tools")
	s := startServer(t, Options{})
	h, p := hostPort(t, s.addr)
	rc := func(args ...string) string {
		t.Helper()
		return strings.TrimSuffix(runTool(t, nil, cli, append([]string{"-h", h, "-p", p}, args...)...), "\n")
	}
	f := func(want string, args ...string) {
		t.Helper()
		if got := rc(args...); got != want {
			t.Errorf("redis-cli %q = %q, want %q", args, got, want)
		}
	}
	f("PONG", "PING")
	f("OK", "SET", "greeting", "hello world")
	f("hello world", "GET", "greeting")
	f("11", "STRLEN", "greeting")
	f("world", "GETRANGE", "greeting", "6", "-1")
	f("OK", "SET", "tmp", "x", "EX", "100")
	f("100", "TTL", "tmp")
	f("1", "PERSIST", "tmp")
	f("-1", "TTL", "tmp")
	f("OK", "MSET", "a", "1", "b", "2")
	f("1\n2\n", "MGET", "a", "b", "nokey")
	f("2", "EXISTS", "a", "b")
	f("4", "DBSIZE")
	if got := sorted(strings.Fields(rc("KEYS", "*"))); strings.Join(got, ",") != "a,b,greeting,tmp" {
		t.Errorf("KEYS * = %q", got)
	}
	f("2", "DEL", "a", "b")
	f("", "GET", "a")
	// A value from stdin (-x): binary-safe, longer than one read.
	blob := bytes.Repeat([]byte("yuebing\x00\r\n"), 100000)
	if got := runTool(t, blob, cli, "-h", h, "-p", p, "-x", "SET", "blob"); strings.TrimSpace(got) != "OK" {
		t.Fatalf("SET -x: %q", got)
	}
	f(strconv.Itoa(len(blob)), "STRLEN", "blob")
	// --scan walks SCAN's cursor to the end.
	got := strings.Fields(rc("--scan", "--pattern", "*"))
	if strings.Join(sorted(got), ",") != "blob,greeting,tmp" {
		t.Errorf("--scan = %q", got)
	}
	info := rc("INFO", "keyspace")
	if !strings.Contains(info, "db0:keys=3,expires=0") {
		t.Errorf("INFO keyspace = %q", info)
	}
	// A pipe of commands (redis-cli --pipe checks every reply).
	var pipe bytes.Buffer
	for i := range 1000 {
		pipe.WriteString(multibulk("SET", fmt.Sprintf("pipe:%d", i), strconv.Itoa(i)))
	}
	out := runTool(t, pipe.Bytes(), cli, "-h", h, "-p", p, "--pipe")
	if !strings.Contains(out, "errors: 0, replies: 1000") {
		t.Errorf("--pipe: %q", out)
	}
	f("999", "GET", "pipe:999")
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestRedisBenchmark runs a short redis-benchmark: it exits non-zero on the
// first error reply, and the server must have stored what it set.
func TestRedisBenchmark(t *testing.T) {
	rb := tool(t, "redis-benchmark", "redis-tools")
	s := startServer(t, Options{})
	h, p := hostPort(t, s.addr)
	n := "2000"
	if testing.Short() {
		n = "500"
	}
	for _, args := range [][]string{
		{"-t", "ping,mset", "-c", "50", "-n", n},
		{"-t", "set,get", "-c", "8", "-d", "4096", "-n", n},
		{"-t", "set,get", "-c", "8", "-d", "4096", "-n", n, "-P", "16"},
		{"-t", "set,get", "-c", "4", "-d", "1048576", "-n", "40"},
	} {
		before := s.Stats().Commands
		out := runTool(t, nil, rb, append([]string{"-h", h, "-p", p, "--csv"}, args...)...)
		rows := parseBenchCSV(out)
		if len(rows) == 0 {
			t.Fatalf("redis-benchmark %q printed no results: %q", args, out)
		}
		for test, rps := range rows {
			if rps <= 0 {
				t.Errorf("redis-benchmark %q: %s at %v requests/s", args, test, rps)
			}
		}
		if got := s.Stats().Commands - before; got < 40 {
			t.Errorf("redis-benchmark %q: the server processed %d commands", args, got)
		}
	}
	c := dial(t, s.addr)
	if got := c.do("STRLEN", "key:__rand_int__"); got != ":1048576\r\n" {
		t.Errorf("STRLEN of redis-benchmark's key = %q", got)
	}
	if st := s.Stats(); st.ErrorReplies != 0 {
		t.Errorf("%d error replies", st.ErrorReplies)
	}
}

// parseBenchCSV reads redis-benchmark --csv output: a header, then
// "TEST","requests per second",...
func parseBenchCSV(out string) map[string]float64 {
	rows := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 2 {
			continue
		}
		name := strings.Trim(f[0], `"`)
		rps, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
		if err != nil || name == "test" {
			continue
		}
		rows[name] = rps
	}
	return rows
}

// python returns Debian's python3 with redis-py importable, or skips: a
// python3 earlier on PATH (pyenv, a venv) may not see Debian's packages.
func python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil {
			if exec.Command(path, "-c", "import redis, redis.asyncio").Run() == nil {
				return path
			}
		}
	}
	t.Skip("no python3 with redis-py (Debian package python3-redis)")
	return ""
}

// TestRedisPyClient runs what redis-py's users do beyond GET and SET:
// URL login, CLIENT INFO and LIST parsed into dicts, transactional and
// plain pipelines, a transaction discarded for a bad command, RESET.
func TestRedisPyClient(t *testing.T) {
	py := python(t)
	s := startServer(t, Options{})
	h, p := hostPort(t, s.addr)
	out := runTool(t, nil, py, "testdata/redispy_client.py", h, p)
	if !strings.HasPrefix(out, "ok ") {
		t.Fatalf("redispy_client.py: %q", out)
	}
	if st := s.Stats(); st.Keys != 0 {
		t.Errorf("after the script: %d keys", st.Keys)
	}
}

// TestLMCacheFlow runs LMCache's RedisConnector traffic with redis-py's
// sync and asyncio clients.
func TestLMCacheFlow(t *testing.T) {
	py := python(t)
	s := startServer(t, Options{})
	h, p := hostPort(t, s.addr)
	chunks, size := "64", strconv.Itoa(256<<10)
	if testing.Short() {
		chunks = "16"
	}
	out := runTool(t, nil, py, "testdata/lmcache_flow.py", h, p, chunks, size)
	if !strings.HasPrefix(out, "ok ") {
		t.Fatalf("lmcache_flow.py: %q", out)
	}
	t.Log(strings.TrimSpace(out))
	if st := s.Stats(); st.Keys != 0 || st.ErrorReplies != 0 {
		t.Errorf("after the flow: %d keys, %d error replies", st.Keys, st.ErrorReplies)
	}
}
