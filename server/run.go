package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/internal/dirlock"
	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/server/budget"
	"github.com/yuebing/yuebing/server/resp"
	"github.com/yuebing/yuebing/server/staging"
	"github.com/yuebing/yuebing/tier"
	"github.com/yuebing/yuebing/tier/dram"
	"github.com/yuebing/yuebing/tier/s3"
	"github.com/yuebing/yuebing/tier/ssd"
)

// Node is a running cache node: the store and the services in front of it.
type Node struct {
	cfg    Config
	log    *slog.Logger
	lock   *dirlock.Lock // DataDir's, held from start to the store's close
	store  *tier.Hierarchy
	budget *budget.Budget // limits.max_inflight_bytes, shared by every front end
	api    *API
	// resp is nil when resp.listen is empty; atomic because the console's
	// sampler reads the node's metrics while Start is still listening.
	resp     atomic.Pointer[resp.Server]
	cluster  *clusterParts   // nil when the node runs alone
	staging  *staging.Server // nil when shm.listen is empty
	services []*service
	failed   chan error // the first service that stops on its own
	// stopBackground ends background loops that are not listeners (the
	// conductor's driver); bg waits for them.
	stopBackground context.CancelFunc
	bg             sync.WaitGroup
	wg             sync.WaitGroup
	once           sync.Once
	shutErr        error

	// conductor is the embedded conductor's driver, nil when it is off.
	conductor *scheduler.Driver
}

// service is one listener and what serves it. Services start and stop
// together: adding a front end is one more entry.
type service struct {
	name     string
	ln       net.Listener
	serve    func(net.Listener) error // returns when shut down
	shutdown func(context.Context) error
	close    func() error // forcibly, when shutdown runs out of time
}

// Run starts a node and serves until ctx ends or a service fails, then
// shuts down gracefully: stop accepting, drain requests in flight (bounded
// by limits.shutdown_timeout), persist contexts, flush DRAM to SSD, close
// the store.
func Run(ctx context.Context, cfg Config) error {
	n, err := Start(cfg)
	if err != nil {
		return err
	}
	var serveErr error
	select {
	case <-ctx.Done():
		n.log.Info("server: shutting down")
	case serveErr = <-n.failed:
		n.log.Error("server: a service stopped", "err", serveErr)
	}
	return errors.Join(serveErr, n.Shutdown())
}

// Start validates cfg, opens the store, binds every listener and starts
// serving. Listener addresses with port 0 get a free port; Addr reports it.
func Start(cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = newLogger(cfg.Log, os.Stderr)
	}
	var tokens *auth.Tokens
	if cfg.Auth.TokensFile != "" {
		var err error
		if tokens, err = auth.Load(cfg.Auth.TokensFile); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data_dir: %w", err)
	}
	// The lock comes before anything in the directory is opened: a node
	// killed a moment ago still holds its files (pebble's LOCK among them)
	// until the kernel has torn it down.
	lock, err := dirlock.Acquire(context.Background(), cfg.DataDir, dirlock.Options{
		Wait: cfg.DataDirLockWait,
		Waiting: func(h *dirlock.HeldError) {
			logger.Warn("server: data_dir is in use; waiting for its holder to exit", "dir", h.Dir, "pid", h.PID, "cmdline", h.Cmdline, "wait", h.Waited)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("server: data_dir: %w (data_dir_lock_wait, --data-dir-lock-wait)", err)
	}
	started := false
	defer func() {
		if !started {
			lock.Release()
		}
	}()
	store, err := openStore(cfg, logger)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: logger, store: store, lock: lock, failed: make(chan error, 1)}
	if n.budget, err = NewBudget(cfg.Limits); err != nil {
		store.Close()
		return nil, err
	}
	if cfg.Cluster.Enabled() {
		if n.cluster, err = newCluster(cfg, store, n); err != nil {
			store.Close()
			return nil, err
		}
	}
	apiOpts := APIOptions{
		Store: store, Tokens: tokens, Limits: cfg.Limits, Budget: n.budget, Contexts: cfg.Contexts,
		ContextsFile: filepath.Join(cfg.DataDir, "contexts.json"), Logger: logger,
		Version: cfg.Version, NodeName: cfg.Cluster.NodeName, Registry: prometheus.NewRegistry(),
		HistoryInterval: cfg.Console.HistoryInterval, Retention: cfg.Retention,
	}
	if err := apiOpts.Registry.Register(nodeCollector{n}); err != nil {
		panic("BUG: server: node metrics: " + err.Error())
	}
	for _, t := range store.Tiers() { // a tier's own series (the S3 tier's requests)
		if c, ok := t.(prometheus.Collector); ok {
			if err := apiOpts.Registry.Register(c); err != nil {
				panic("BUG: server: tier metrics: " + err.Error())
			}
		}
	}
	if n.cluster != nil {
		apiOpts.Cluster = n.cluster.node
	}
	bgCtx, stopBackground := context.WithCancel(context.Background())
	n.stopBackground = stopBackground
	if cfg.Conductor.Enabled && cfg.Router.Enabled() {
		rt, err := router.New(cfg.Router.options(cfg.Conductor))
		if err == nil {
			err = registerAll(apiOpts.registry(), rt.Collectors())
		}
		var svc *ConductorAPI
		if err == nil {
			svc, err = NewRouterConductorAPI(rt, scheduler.Limits{MaxKeys: cfg.Limits.MaxBatchKeys})
		}
		if err != nil {
			n.closeCluster()
			store.Close()
			return nil, fmt.Errorf("%w: router: %w", ErrInvalidConfig, err)
		}
		// Clients call the OpenAI endpoints with their own tokens; the
		// conductor's status stays infrastructure's.
		ra := NewRouterAPI(rt)
		apiOpts.Mount = func(v1 gin.IRouter) {
			svc.Register(v1.Group("", n.adminOnly))
			ra.Register(v1)
		}
		n.bg.Go(func() { rt.Run(bgCtx) })
	} else if cfg.Conductor.Enabled {
		d, svc, err := newConductor(cfg.Conductor, cfg.Limits)
		if err != nil {
			n.closeCluster()
			store.Close()
			return nil, err
		}
		n.conductor = d
		// Placement is infrastructure: gateways and engines call it with
		// an admin (service) token when authentication is on.
		apiOpts.Mount = func(v1 gin.IRouter) { svc.Register(v1.Group("", n.adminOnly)) }
		n.bg.Go(func() { d.Run(bgCtx) })
	}
	if cfg.Shm.Listen != "" {
		// The API answers the sessions' requests; it exists before the
		// socket serves.
		handle := func(ctx context.Context, sess *staging.Session, line []byte) []byte {
			return n.api.ServeShm(ctx, sess, line)
		}
		if n.staging, err = newStaging(cfg.Shm, tokens, handle, logger); err != nil {
			n.stopBackground()
			n.bg.Wait()
			n.closeCluster()
			store.Close()
			return nil, err
		}
		apiOpts.Staging = n.staging
	}
	n.api, err = NewAPI(apiOpts)
	if err != nil {
		n.closeStaging()
		n.stopBackground()
		n.bg.Wait()
		n.closeCluster()
		store.Close()
		return nil, err
	}
	err = n.listen(tokens)
	if err == nil && n.cluster != nil {
		// Registering needs the bound addresses; peers' calls wait in the
		// listen queue until serving starts below.
		var respAddr string
		if a := n.Addr("resp"); a != nil {
			respAddr = a.String()
		}
		if err = n.cluster.join(cfg, n.Addr("http").String(), respAddr); err != nil {
			for _, s := range n.services {
				s.ln.Close()
			}
		}
	}
	if err != nil {
		n.closeStaging()
		n.stopBackground()
		n.bg.Wait()
		n.api.Close()
		n.closeCluster()
		store.Close()
		return nil, err
	}
	started = true
	n.banner(tokens)
	for _, s := range n.services {
		n.wg.Go(func() {
			if err := s.serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, resp.ErrServerClosed) {
				select {
				case n.failed <- fmt.Errorf("server: %s: %w", s.name, err):
				default:
				}
			}
		})
	}
	return n, nil
}

// registry returns the registry the API will use, creating it now so
// others can register beside the API's own metrics.
func (o *APIOptions) registry() *prometheus.Registry {
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	return o.Registry
}

func registerAll(reg *prometheus.Registry, cs []prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// adminOnly defers to the API's check; the API does not exist yet when its
// mounted routes are declared.
func (n *Node) adminOnly(c *gin.Context) { n.api.AdminOnly(c) }

// newConductor builds the embedded conductor from the options Validate
// resolved.
func newConductor(cc ConductorConfig, limits Limits) (*scheduler.Driver, *ConductorAPI, error) {
	d, err := scheduler.NewDriver(scheduler.DriverOptions{Core: cc.Options})
	if err != nil {
		return nil, nil, fmt.Errorf("server: conductor: %w", err)
	}
	svc, err := NewConductorAPI(d, scheduler.Limits{MaxKeys: limits.MaxBatchKeys})
	return d, svc, err
}

func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	ho := &slog.HandlerOptions{Level: logLevels[c.Level]}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

func openStore(cfg Config, logger *slog.Logger) (*tier.Hierarchy, error) {
	maxBlock := int64(cfg.Limits.MaxBlockSize)
	do := cfg.DRAM.Options
	do.Capacity = int64(cfg.DRAM.Capacity)
	do.MaxBlockSize, do.Logger = min(maxBlock, do.Capacity), logger
	d, err := dram.New(do)
	if err != nil {
		return nil, fmt.Errorf("server: dram tier: %w", err)
	}
	so := cfg.SSD.Options
	so.Dir, so.Capacity = filepath.Join(cfg.DataDir, "ssd"), int64(cfg.SSD.Capacity)
	so.MaxBlockSize, so.Logger = min(maxBlock, so.Capacity/2), logger
	so.OfferEvicted = cfg.S3.Enabled() // demoted to the S3 tier
	s, err := ssd.Open(so)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("server: ssd tier: %w", err)
	}
	tiers := []tier.Tier{d, s}
	if cfg.S3.Enabled() {
		o := cfg.S3
		o.Logger = logger
		err := o.LoadCredentials(os.Getenv)
		var st *s3.Tier
		if err == nil {
			st, err = s3.Open(context.Background(), o)
		}
		if err != nil {
			d.Close()
			s.Close()
			return nil, fmt.Errorf("server: s3 tier: %w", err)
		}
		tiers = append(tiers, st)
	}
	hopts := tier.HierarchyOptions{Logger: logger}
	cfg.SSD.AdmissionConfig.apply(&hopts)
	h, err := tier.NewHierarchy(tiers, hopts)
	if err != nil {
		for _, t := range tiers {
			t.Close()
		}
		return nil, err
	}
	return h, nil
}

// listen binds every configured listener before any serves, so a port in
// use fails the start instead of leaving a half-started node.
func (n *Node) listen(tokens *auth.Tokens) error {
	srv := &http.Server{
		Handler:           withInternal(n.api.Handler(), n.clusterNode()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    headerReadBytes,
		ErrorLog:          log.New(slogWriter{n.log}, "", 0),
	}
	ln, err := net.Listen("tcp", n.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("server: http.listen: %w", err)
	}
	// Block and object puts skip net/http's per-request goroutines
	// (putconn.go).
	puts := newPutConns(srv)
	n.services = append(n.services, &service{
		name: "http", ln: limitListener(ln, n.cfg.Limits.MaxConnections),
		serve: puts.serve, shutdown: puts.shutdown, close: puts.close,
	})
	if n.cfg.RESP.Listen != "" {
		ropts := resp.Options{
			Store: n.store, Tokens: tokens, MaxValueSize: int64(n.cfg.Limits.MaxBlockSize),
			Logger: n.log, Version: n.cfg.Version, Budget: n.budget.User(budgetRESP),
			Latency:   n.api.RESPLatency,
			Retain:    n.api.retainRESP,
			InlineMax: n.cfg.RESP.InlineMax, InlineCapacity: int64(n.cfg.RESP.InlineCapacity),
			EventLoop: n.cfg.RESP.EventLoop, EventLoops: n.cfg.RESP.EventLoops,
		}
		if cn := n.clusterNode(); cn != nil && !n.cfg.Cluster.RESPLocalOnly {
			ropts.Cluster = clusterNames{cn}
		}
		rs, err := resp.NewServer(ropts)
		if err != nil {
			ln.Close()
			return fmt.Errorf("server: resp: %w", err)
		}
		if cn := n.clusterNode(); cn != nil {
			cn.SetNameLookup(func(ns, name string) (cluster.NameInfo, bool) {
				k, ok := rs.LocalName(ns, name)
				return cluster.NameInfo{Key: k.Block, Size: k.Size, ExpireAtMs: k.ExpireAtMs, Gen: k.Gen}, ok
			})
			cn.SetNameOps(func(op cluster.NameOp) cluster.NameOpResult {
				switch op.Op {
				case cluster.NameForget:
					dropped, newer := rs.ForgetLocal(op.Namespace, op.Name, op.Gen, op.From > cn.ID())
					return cluster.NameOpResult{Done: dropped, Newer: newer}
				case cluster.NameExpire:
					return cluster.NameOpResult{Done: rs.ExpireLocal(op.Namespace, op.Name, op.Gen, op.ExpireAtMs)}
				}
				return cluster.NameOpResult{}
			})
		}
		rln, err := net.Listen("tcp", n.cfg.RESP.Listen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("server: resp.listen: %w", err)
		}
		n.resp.Store(rs)
		n.services = append(n.services, &service{
			name: "resp", ln: rln, serve: rs.Serve, shutdown: rs.Shutdown,
			close: func() error { // Shutdown past its deadline closes every connection
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return rs.Shutdown(ctx)
			},
		})
	}
	if n.staging != nil {
		st := n.staging
		n.services = append(n.services, &service{
			name: "shm", ln: st.Listener(),
			// The socket is a convenience for clients on this host: if
			// it stops, the node serves on without it rather than
			// letting a local client's doing end the node.
			serve: func(net.Listener) error {
				if err := st.Serve(); err != nil {
					n.log.Error("server: shm: the staging socket stopped; the node goes on without it", "err", err)
				}
				return nil
			},
			shutdown: func(context.Context) error { return st.Close() },
			close:    st.Close,
		})
	}
	return nil
}

// newStaging binds the shared-memory staging socket; "auto" names an
// abstract socket after the process, so nodes on one host never collide.
func newStaging(c ShmConfig, tokens *auth.Tokens, handle func(context.Context, *staging.Session, []byte) []byte, logger *slog.Logger) (*staging.Server, error) {
	addr := c.Listen
	if addr == "auto" {
		var r [4]byte
		rand.Read(r[:])
		addr = fmt.Sprintf("@yuebing-shm-%d-%x", os.Getpid(), r)
	}
	o := c
	o.Listen, o.Logger, o.Handle = addr, logger, handle
	if tokens == nil {
		// Every client is the same principal: a quota would only
		// shrink the totals.
		o.MaxOwnerSessions, o.MaxOwnerBytes = c.MaxSessions, c.MaxBytes
	}
	o.Authenticate = func(token string) (string, any, error) {
		// Wrong tokens count against the throttle HTTP and Redis share;
		// a unix socket's peers have no address, so they are one
		// source, as every local user is behind 127.0.0.1 there.
		p, err := tokens.AuthenticateFrom(netip.Addr{}, token)
		return shmOwner(p), p, err
	}
	st, err := staging.New(o)
	if err != nil {
		return nil, fmt.Errorf("server: shm.listen: %w", err)
	}
	return st, nil
}

func (n *Node) closeStaging() {
	if n.staging != nil {
		n.staging.Close()
	}
}

// clusterNames lets the Redis front end find the keys other nodes hold.
type clusterNames struct{ n *cluster.Node }

func (c clusterNames) LookupName(ctx context.Context, ns, name string) (resp.RemoteKey, error) {
	info, err := c.n.LookupName(ctx, ns, name)
	if err != nil {
		return resp.RemoteKey{}, err
	}
	return resp.RemoteKey{Block: info.Key, Size: info.Size, ExpireAtMs: info.ExpireAtMs, Node: info.Node, Gen: info.Gen}, nil
}

func (c clusterNames) ForgetName(ctx context.Context, ns, name string, gen uint64) (int, bool, error) {
	return c.n.ForgetName(ctx, ns, name, gen)
}

func (c clusterNames) ExpireName(ctx context.Context, k resp.RemoteKey, ns, name string, expireAtMs int64) (bool, error) {
	return c.n.ExpireName(ctx, k.Node, ns, name, k.Gen, expireAtMs)
}

func (c clusterNames) ReadName(ctx context.Context, k resp.RemoteKey) (*tier.Handle, error) {
	return c.n.ReadFrom(ctx, k.Block, k.Node)
}

// slogWriter carries net/http's internal log lines (TLS noise, handler
// panics) into the node's logger.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn("server: http", "msg", string(p))
	return len(p), nil
}

// Addr returns the bound address of the named service ("http"), or nil.
func (n *Node) Addr(name string) net.Addr {
	for _, s := range n.services {
		if s.name == name {
			return s.ln.Addr()
		}
	}
	return nil
}

func (n *Node) closeCluster() error {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.close()
}

func (n *Node) clusterNode() *cluster.Node {
	if n.cluster == nil {
		return nil
	}
	return n.cluster.node
}

// Cluster returns the node's cluster membership, nil when it runs alone.
func (n *Node) Cluster() *cluster.Node { return n.clusterNode() }

// Store returns the node's block store.
func (n *Node) Store() *tier.Hierarchy { return n.store }

// API returns the node's HTTP API.
func (n *Node) API() *API { return n.api }

// Failed delivers the error of a service that stopped on its own.
func (n *Node) Failed() <-chan error { return n.failed }

// Shutdown stops the node gracefully; see Run. It is safe to call more
// than once.
func (n *Node) Shutdown() error {
	n.once.Do(func() { n.shutErr = n.shutdown() })
	return n.shutErr
}

func (n *Node) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Limits.ShutdownTimeout)
	defer cancel()
	n.api.SetDraining()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range n.services {
		wg.Go(func() {
			if err := s.shutdown(ctx); err != nil {
				n.log.Warn("server: requests still running at the shutdown deadline; closing their connections", "service", s.name, "err", err)
				s.close()
				if !errors.Is(err, context.DeadlineExceeded) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	n.wg.Wait()
	n.stopBackground()
	n.bg.Wait()
	// Leaving the cluster revokes the node's lease, so the leader repairs
	// its blocks now rather than after the lease's TTL.
	if err := n.closeCluster(); err != nil {
		errs = append(errs, fmt.Errorf("server: leaving the cluster: %w", err))
	}
	if err := n.api.Close(); err != nil {
		errs = append(errs, fmt.Errorf("server: persisting contexts: %w", err))
	}
	// Flushing gets a budget of its own: a drain that used all of its
	// budget must not cost the DRAM blocks their way to SSD.
	fctx, fcancel := context.WithTimeout(context.Background(), n.cfg.Limits.ShutdownTimeout)
	defer fcancel()
	start := time.Now()
	moved, err := n.store.Flush(fctx)
	n.log.Info("server: flushed DRAM blocks to SSD", "blocks", moved, "took", time.Since(start).Round(time.Millisecond), "err", err)
	if err := n.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("server: closing the store: %w", err))
	}
	if err := n.lock.Release(); err != nil {
		errs = append(errs, fmt.Errorf("server: data_dir: %w", err))
	}
	n.log.Info("server: stopped")
	return errors.Join(errs...)
}

// limitListener accepts at most n connections at a time; more wait in the
// kernel's accept queue, so memory per connection stays bounded.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	// Waiting for a slot must end when the listener closes: Shutdown waits
	// for Serve to return before it closes idle connections.
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// ReadFrom lets a relayed block be spliced from another connection into
// this one, as the connection under the wrapper does.
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}

// SyscallConn gives raw reads (internal/rawsock) the socket under the
// wrapper.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
