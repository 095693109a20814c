package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/client"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/kvevents"
	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/server"
)

// layoutName is the engines' KV shape: Llama-3-70B's 80 layers with one
// narrow fp8 head, 1,280 bytes per token, so real KV moves without a
// laptop's memory going to it.
const layoutName = "sim-70b"

// The node's capacities: enough for a demo's prompts many times over,
// little enough to start in an instant anywhere.
const (
	dramCapacity = 256 << 20
	ssdCapacity  = 1 << 30
)

// stopTimeout bounds each step of stopping: requests still running, saves
// still queued.
const stopTimeout = 10 * time.Second

// Run starts the demo, prints where to reach it on out, sends the traffic
// if asked, and serves until ctx ends; then it stops every part and
// removes the temporary data directory. A ctx that ends is a normal stop,
// not an error. Invalid options are an error wrapping ErrInvalid.
func Run(ctx context.Context, o Options, out io.Writer) (err error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	s, err := start(o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.stop()) }()
	if err := s.waitEvents(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s.banner(out)
	if o.Traffic {
		if err := s.traffic(ctx, out); err != nil && ctx.Err() == nil {
			return err
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.node.Failed():
		return err
	}
}

// system is a running demo.
type system struct {
	opts      Options
	layout    adapter.Layout
	namespace string
	dir       string
	removeDir bool
	node      *server.Node
	base      string // the node's HTTP base URL: API, router, console
	engines   []*engine
	cancel    context.CancelFunc // ends the engines' loops
	loops     sync.WaitGroup
	hc        *http.Client
}

// engine is one engine simulator and its sockets.
type engine struct {
	id   string
	ln   net.Listener
	pub  *kvevents.Publisher
	conn *adapter.Connector
	sim  *enginesim.Engine
	srv  *http.Server // nil until it serves ln
	url  string
}

// start brings every part up. The engines' listeners and event sockets are
// bound first, so the node's router starts knowing where they are; the
// engines' connectors need the node, so the engines themselves come last.
// On an error, what was started is stopped.
func start(o Options) (s *system, err error) {
	layout, err := adapter.Preset(layoutName, o.BlockSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s = &system{
		opts: o, layout: layout, namespace: "demo/" + layout.Name, dir: o.DataDir, cancel: cancel,
		hc: &http.Client{Timeout: time.Minute},
	}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "yuebing-demo-"); err != nil {
			return s, fmt.Errorf("demo: data directory: %w", err)
		}
		s.removeDir = true
	}
	var engines []router.Engine
	for i := range o.Engines {
		e := &engine{id: "e" + strconv.Itoa(i)}
		s.engines = append(s.engines, e)
		if e.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return s, fmt.Errorf("demo: engine %s: %w", e.id, err)
		}
		e.url = "http://" + e.ln.Addr().String()
		e.pub, err = kvevents.NewPublisher(kvevents.PublisherOptions{
			Endpoint: "tcp://127.0.0.1:0", Replay: "tcp://127.0.0.1:0", Logger: o.Logger,
		})
		if err != nil {
			return s, fmt.Errorf("demo: engine %s: KV events: %w", e.id, err)
		}
		engines = append(engines, router.Engine{ID: e.id, URL: e.url, Events: e.pub.Endpoint(), Replay: e.pub.ReplayEndpoint()})
	}

	cfg := server.DefaultConfig()
	cfg.HTTP.Listen = "127.0.0.1:0"
	// The demo needs the HTTP API only; the other front ends would take
	// fixed ports or sockets that a second demo would collide on.
	cfg.RESP.Listen, cfg.Transfer.Listen, cfg.Shm.Listen = "", "", ""
	cfg.DataDir = s.dir
	cfg.DRAM.Capacity, cfg.SSD.Capacity = dramCapacity, ssdCapacity
	cfg.SSD.NoSync = true // a demo's data is thrown away
	cfg.Console.HistoryInterval = 2 * time.Second
	cfg.Conductor.BlockSize = o.BlockSize
	cfg.Conductor.KVBytesPerToken = server.ByteSize(layout.BlockBytes() / int64(layout.BlockTokens))
	cfg.Conductor.Options.Logger = o.Logger
	cfg.Router = server.RouterConfig{Model: layout.Name, Namespace: s.namespace, BlockSize: o.BlockSize, Engines: engines}
	cfg.Logger, cfg.Banner, cfg.Version = o.Logger, io.Discard, o.Version
	if s.node, err = server.Start(cfg); err != nil {
		return s, fmt.Errorf("demo: node: %w", err)
	}
	s.base = "http://" + s.node.Addr("http").String()

	cl, err := client.New(s.base, client.Options{})
	if err != nil {
		return s, fmt.Errorf("demo: %w", err)
	}
	for _, e := range s.engines {
		if e.conn, err = adapter.New(adapter.Options{Client: cl, Namespace: s.namespace, Layout: layout, Logger: o.Logger}); err != nil {
			return s, fmt.Errorf("demo: engine %s: %w", e.id, err)
		}
		e.sim, err = enginesim.New(enginesim.Options{
			Name: e.id, Layout: layout, Namespace: s.namespace, Connector: e.conn, Events: e.pub, Logger: o.Logger,
			// Every hit in the node is loaded, so what the node saves
			// an engine shows (by default an engine computes what it
			// estimates it computes sooner).
			DisableLoadIfFaster: true,
		})
		if err != nil {
			return s, fmt.Errorf("demo: engine %s: %w", e.id, err)
		}
		e.srv = &http.Server{Handler: e.sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
		s.loops.Go(func() { e.sim.Run(runCtx) })
		s.loops.Go(func() { e.srv.Serve(e.ln) })
	}
	return s, nil
}

// stop ends every part and removes a temporary data directory. The node
// goes first: the router's requests in flight finish on the engines, still
// up, and no router is left to miss their event streams; then the engines,
// whose connectors have nothing left to save once no request runs. stop is
// called once.
func (s *system) stop() error {
	var errs []error
	if s.node != nil {
		if err := s.node.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("demo: node: %w", err))
		}
	}
	var wg sync.WaitGroup
	for _, e := range s.engines {
		if e.srv == nil {
			if e.ln != nil {
				e.ln.Close()
			}
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			if e.srv.Shutdown(ctx) != nil {
				e.srv.Close()
			}
		})
	}
	wg.Wait()
	s.cancel()
	s.loops.Wait()
	for _, e := range s.engines {
		if e.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			e.conn.Close(ctx)
			cancel()
		}
		if e.pub != nil {
			e.pub.Close()
		}
	}
	s.hc.CloseIdleConnections()
	if s.removeDir {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("demo: removing the data directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// banner tells where everything is.
func (s *system) banner(w io.Writer) {
	fmt.Fprintf(w, "yuebing demo: a node, %d engine simulators and the router, on this machine\n", len(s.engines))
	fmt.Fprintf(w, "  router   %s/v1  (OpenAI API, model %s)\n", s.base, s.layout.Name)
	fmt.Fprintf(w, "  console  %s/ui/\n", s.base)
	for _, e := range s.engines {
		fmt.Fprintf(w, "  engine   %s %s  (KV events %s)\n", e.id, e.url, e.pub.Endpoint())
	}
	keep := "kept"
	if s.removeDir {
		keep = "removed at exit"
	}
	fmt.Fprintf(w, "  data     %s  (%s)\n", s.dir, keep)
	fmt.Fprintf(w, "  blocks   %d tokens, namespace %s\n", s.opts.BlockSize, s.namespace)
	fmt.Fprintf(w, "try:\n  %s\n", s.curl())
	fmt.Fprintf(w, "Ctrl-C stops everything.\n")
}

// curl is a chat to try, as a shell command.
func (s *system) curl() string {
	return fmt.Sprintf(`curl %s/v1/chat/completions -H 'Content-Type: application/json' -d '{"model":"%s","messages":[{"role":"user","content":"What is a KV cache?"}],"max_tokens":16}'`,
		s.base, s.layout.Name)
}

// waitEvents waits until the router follows every engine's KV events:
// each engine runs a one-block prompt of its own, sent to it directly,
// until the router counts a stored event from it. ZMQ drops what a
// subscriber not yet connected would have read, so the prompt is sent
// again each round until its event arrives.
func (s *system) waitEvents(ctx context.Context) error {
	const wait = 30 * time.Second
	deadline := time.Now().Add(wait)
	seen := make([]bool, len(s.engines))
	for round := 0; ; round++ {
		series, err := bench.RouterSeries(ctx, s.hc, s.base)
		left := 0
		for i, e := range s.engines {
			if seen[i] = seen[i] || series[bench.StoredEventsSeries(e.id)] > 0; seen[i] {
				continue
			}
			left++
			toks := make([]string, s.opts.BlockSize)
			for j := range toks {
				// Far from the byte-valued tokens of text prompts: no
				// chat shares this block.
				toks[j] = strconv.Itoa(0x100000 + round<<12 + i<<8 + j)
			}
			body := `{"max_tokens":1,"prompt":[` + strings.Join(toks, ",") + `]}`
			if err := s.post(ctx, e.url+"/v1/completions", body, nil); err != nil {
				return fmt.Errorf("demo: engine %s: %w", e.id, err)
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: the router follows the KV events of %d of %d engines after %v (%v)", len(s.engines)-left, len(s.engines), wait, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// post sends a JSON body; see do.
func (s *system) post(ctx context.Context, url, body string, read func(*http.Response) error) error {
	return s.do(ctx, http.MethodPost, url, body, read)
}

// do sends a request with a JSON body (none if empty) and hands a 2xx
// answer to read (nil: discarded); any other answer is an error quoting
// the start of its body.
func (s *system) do(ctx context.Context, method, url, body string, read func(*http.Response) error) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	if read != nil {
		return read(resp)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
