package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/cluster"
)

// Node states of the soak. Workers send requests to a node that is up or
// down (a killed node answers nothing: its errors are counted), and wait
// while it is being verified after a restart, so that no load evicts the
// durable blocks the check is about to read.
const (
	NodeUp int32 = iota
	NodeDown
	NodeVerifying
)

// Node is one `yuebing serve` child process, restarted on the same data
// directory and addresses after each kill: a Proc whose banner ends at the
// "auth" line, ready once its HTTP API answers.
type Node struct {
	Proc
	Dir string
	Hc  *http.Client

	State atomic.Int32
	// Life counts the node's starts: a value read back in a later life
	// may be one the store legitimately forgot a delete of.
	Life atomic.Int64
	// UpSince is when the node last came up (unix nanos).
	UpSince atomic.Int64

	// Guarded by Proc's mu.
	httpAddr string
	respAddr string
	Etcd     string
	client   *client.Client

	// Sampled by the RSS sampler.
	MaxRSS, MaxIndex atomic.Int64

	// durable lists the durable puts acknowledged by this node that may
	// still be on its disk; guarded by durMu.
	DurMu   sync.Mutex
	Durable []DurableWrite
}

// DurableWrite is a put the node acknowledged from its SSD tier.
type DurableWrite struct {
	Key  [32]byte
	Seq  uint64
	Size int
}

func (n *Node) Client() *client.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.client
}

func (n *Node) RESPAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.respAddr
}

// StartOnce runs the binary, waits for its banner and then for its
// readiness.
func (n *Node) StartOnce(ctx context.Context) error {
	if n.Parse == nil {
		n.Parse = serveBanner
	}
	if n.BannerWait == 0 {
		n.BannerWait = 90 * time.Second
	}
	banner, err := n.startOnce(ctx)
	if err != nil {
		return err
	}
	logStart := n.logStart
	httpAddr := strings.TrimPrefix(banner["http"], "http://")
	c, err := client.New("http://"+httpAddr, client.Options{HTTPClient: n.Hc})
	if err != nil {
		n.Kill()
		return err
	}
	n.mu.Lock()
	n.httpAddr, n.client = httpAddr, c
	n.respAddr = strings.TrimPrefix(banner["resp"], "redis://")
	if e := banner["etcd"]; e != "" {
		n.Etcd = e
	}
	n.mu.Unlock()
	// Later starts reuse the addresses the first one bound, so clients
	// and the other nodes find the node where it was.
	n.PinFlag("--http-listen", httpAddr)
	if n.respAddr != "" {
		n.PinFlag("--resp-listen", n.respAddr)
	}
	if t := banner["transfer"]; t != "" && t != "disabled" {
		n.PinFlag("--transfer-listen", t)
	}
	if e := banner["etcd"]; e != "" {
		n.PinFlag("--etcd-embedded-listen", strings.TrimPrefix(e, "http://"))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.Ready(ctx); err == nil {
			break
		}
		if n.Exited() {
			return fmt.Errorf("bench: soak: %s exited before it was ready: %s", n.Name, LogTail(n.Log.Name(), logStart))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			n.Kill()
			return fmt.Errorf("bench: soak: %s not ready within 60s", n.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.Life.Add(1)
	return nil
}

// serveBanner reads `yuebing serve`'s start-up banner, "name value" lines,
// up to its "auth" line (printed once every listener is up).
func serveBanner(line string, m map[string]string) bool {
	f := strings.Fields(line)
	if len(f) >= 2 {
		m[f[0]] = f[1]
	}
	return len(f) > 0 && f[0] == "auth"
}

// Start starts the node, retrying for up to retryFor: a restart right
// after kill -9 may find the data directory still locked, or in a cluster
// the node's name still registered until its lease expires.
func (n *Node) Start(ctx context.Context, retryFor time.Duration) (retries int, err error) {
	deadline := time.Now().Add(retryFor)
	for {
		err = n.StartOnce(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return retries, err
		}
		retries++
		time.Sleep(500 * time.Millisecond)
	}
}

// Status reads the node's view of the cluster.
func (n *Node) Status(ctx context.Context) (cluster.Status, error) {
	var st cluster.Status
	n.mu.Lock()
	url := "http://" + n.httpAddr + "/v1/cluster"
	n.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return st, err
	}
	resp, err := n.Hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("bench: soak: GET /v1/cluster on %s: %d %s", n.Name, resp.StatusCode, bytes.TrimSpace(b))
	}
	return st, json.Unmarshal(b, &st)
}

// ReadRSS returns a process's resident set size from /proc/PID/status.
func ReadRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, errors.New("bench: soak: no VmRSS line")
}

// IndexBytes is the size of the SSD tier's pebble index directories
// (DATA_DIR/ssd/index and any index.N rebuilt after an index fault).
func IndexBytes(dataDir string) int64 {
	var total int64
	ents, _ := os.ReadDir(filepath.Join(dataDir, "ssd"))
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		filepath.WalkDir(filepath.Join(dataDir, "ssd", e.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
	}
	return total
}

// LogMessages counts the warning and error lines of a node's log (slog's
// text format, as --log-level warn writes it, or the default logger's
// "2006/01/02 15:04:05 WARN msg k=v", as the router writes it) by level
// and message.
func LogMessages(path string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		level := ""
		switch {
		case strings.Contains(line, "level=WARN "):
			level = "WARN"
		case strings.Contains(line, "level=ERROR "):
			level = "ERROR"
		default:
			if level, msg, ok := defaultLogLine(line); ok {
				out[level+" "+msg]++
			}
			continue
		}
		msg := "(no msg)"
		if _, rest, ok := strings.Cut(line, "msg="); ok {
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				msg, _ = strconv.Unquote(q)
			} else {
				msg, _, _ = strings.Cut(rest, " ")
			}
		}
		out[level+" "+msg]++
	}
	return out
}

// defaultLogLine reads a warning or error line of slog's default logger:
// "2006/01/02 15:04:05 LEVEL message key=value ...", the message being
// what comes before the first attribute.
func defaultLogLine(line string) (level, msg string, ok bool) {
	f := strings.SplitN(line, " ", 4)
	if len(f) < 4 || len(f[0]) != 10 || f[0][4] != '/' || len(f[1]) != 8 || f[1][2] != ':' {
		return "", "", false
	}
	if level = f[2]; level != "WARN" && level != "ERROR" {
		return "", "", false
	}
	msg = f[3]
	for i := 0; i < len(msg); i++ {
		if msg[i] != ' ' {
			continue
		}
		k := msg[i+1:]
		j := strings.IndexFunc(k, func(r rune) bool {
			return !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		})
		if j > 0 && k[j] == '=' {
			msg = msg[:i]
			break
		}
	}
	return level, msg, true
}
