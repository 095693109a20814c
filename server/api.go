package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/cluster"
	"github.com/yuebing/yuebing/server/auth"
	"github.com/yuebing/yuebing/server/budget"
	"github.com/yuebing/yuebing/server/console"
	"github.com/yuebing/yuebing/server/staging"
	"github.com/yuebing/yuebing/tier"
)

func init() {
	// Gin's debug mode prints every route on start-up and warns on
	// stdout; the server logs through slog instead.
	gin.SetMode(gin.ReleaseMode)
}

// APIOptions configures the HTTP API.
type APIOptions struct {
	// Store is the block store. Required.
	Store *tier.Hierarchy
	// Tokens authenticates callers; nil turns authentication off.
	Tokens *auth.Tokens
	// Limits; zero fields take Limits' defaults.
	Limits Limits
	// Budget bounds the block bytes requests hold in the heap, shared with
	// the node's other front ends. Default: a budget of its own of
	// Limits.MaxInflightBytes, waiting Limits.QueueTimeout.
	Budget *budget.Budget
	// Contexts bounds the context cache; zero fields take defaults.
	Contexts ContextsConfig
	// ContextsFile persists contexts across restarts; "" keeps them in
	// memory only.
	ContextsFile string
	// Registry receives the API's metrics. Default: a new registry.
	Registry *prometheus.Registry
	// Now is the clock for contexts. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Cluster, when the node is in one, serves reads of blocks held
	// elsewhere, the /v1/cluster endpoints and replica counts.
	Cluster *cluster.Node
	// Staging, when set, serves the /v1/shm endpoints: block bytes moved
	// through shared-memory segments of clients on the same host.
	Staging *staging.Server
	// Mount, if set, adds routes to the authenticated /v1 group: the
	// embedded conductor. Requests reach them with the same limits and
	// authentication as the API's own.
	Mount func(v1 gin.IRouter)
	// Version and NodeName are reported by GET /v1/stats. Default
	// NodeName: the host name.
	Version, NodeName string
	// HistoryInterval is how often the counters the console charts are
	// sampled; ten minutes of samples are kept. Default 5s.
	HistoryInterval time.Duration
	// Retention bounds hard pins (docs/retention.md).
	Retention RetentionOptions
}

// API is the HTTP API of a cache node: blocks, batches, contexts and admin
// endpoints on a gin engine. It is safe for concurrent use. Close stops its
// background work; the store stays open and is the caller's to close.
type API struct {
	opts     APIOptions
	store    *tier.Hierarchy
	tokens   *auth.Tokens
	limits   Limits
	engine   *gin.Engine
	v1       *gin.RouterGroup
	contexts *contextStore
	pins     *pinQuota // hard pins by namespace (retention.go)
	metrics  *metrics
	budget   *budget.User // the HTTP front end's share of the node's budget
	draining atomic.Bool
	log      *slog.Logger
	started  time.Time
	history  *console.History
	// shmLatency times the shared-memory requests (ServeShm).
	shmLatency console.Meter
	// respLatency times the Redis front end's commands (RESPLatency).
	respLatency console.Meter
	stopBg      context.CancelFunc
	bg          sync.WaitGroup
}

// NewAPI builds the API over a store. It loads persisted contexts and
// re-applies their pins.
func NewAPI(opts APIOptions) (*API, error) {
	if opts.Store == nil {
		return nil, errors.New("server: APIOptions.Store is required")
	}
	opts.Limits.ensureDefaults()
	if opts.Contexts.MaxTTL == 0 {
		opts.Contexts.MaxTTL = 24 * time.Hour
	}
	if opts.Contexts.MaxContexts == 0 {
		opts.Contexts.MaxContexts = 10000
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.NodeName == "" {
		opts.NodeName, _ = os.Hostname()
	}
	if opts.Budget == nil {
		b, err := NewBudget(opts.Limits)
		if err != nil {
			return nil, err
		}
		opts.Budget = b
	}
	a := &API{
		opts:    opts,
		store:   opts.Store,
		tokens:  opts.Tokens,
		limits:  opts.Limits,
		budget:  opts.Budget.User(budgetHTTP),
		log:     opts.Logger,
		started: opts.Now(),
	}
	cs, err := openContexts(contextsOptions{
		Store: opts.Store, Path: opts.ContextsFile, Max: opts.Contexts.MaxContexts,
		Now: opts.Now, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	a.contexts = cs
	if err := a.startRetention(); err != nil {
		cs.Close()
		return nil, err
	}
	m, err := newMetrics(opts.Registry, a)
	if err == nil {
		err = registerAuthMetrics(opts.Registry, opts.Tokens)
	}
	if err != nil {
		cs.Close()
		return nil, err
	}
	a.metrics = m
	a.startHistory()
	a.engine = a.routes()
	return a, nil
}

// Handler returns the API's http.Handler.
func (a *API) Handler() http.Handler { return a.engine }

// Router returns the authenticated /v1 group, so other parts of a node can
// mount their endpoints beside the built-in ones, behind the same auth,
// metrics and limits.
func (a *API) Router() gin.IRouter { return a.v1 }

// Engine returns the gin engine, for listing routes.
func (a *API) Engine() *gin.Engine { return a.engine }

// SetDraining makes /readyz answer 503, so load balancers stop sending
// traffic while the node shuts down.
func (a *API) SetDraining() { a.draining.Store(true) }

// Close stops the context cache's background work and persists it.
func (a *API) Close() error {
	a.stopBg()
	a.bg.Wait()
	return a.contexts.Close()
}

func (a *API) routes() *gin.Engine {
	r := gin.New()
	r.RedirectTrailingSlash = false
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	r.Use(a.metrics.middleware, gin.CustomRecovery(a.recovered), a.limitHeaders)
	r.NoRoute(func(c *gin.Context) {
		a.fail(c, fmt.Errorf("%w: no route %s %s", errNoRoute, c.Request.Method, c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		a.fail(c, fmt.Errorf("%w: %s is not allowed on %s", errMethod, c.Request.Method, c.Request.URL.Path))
	})

	r.GET("/healthz", a.healthz)
	r.GET("/readyz", a.readyz)
	r.GET("/metrics", a.metrics.handler)
	console.Register(r)

	v1 := r.Group("/v1", a.limit, a.authenticate)
	a.v1 = v1
	v1.POST("/keys", a.postKeys)

	v1.PUT("/blocks/:key", a.putBlock)
	v1.GET("/blocks/:key", a.getBlock)
	v1.HEAD("/blocks/:key", a.headBlock)
	v1.DELETE("/blocks/:key", a.deleteBlock)
	v1.POST("/blocks/:key/replicas", a.setReplicas)

	v1.PUT("/objects/*name", a.putObject)
	v1.GET("/objects/*name", a.getObject)
	v1.HEAD("/objects/*name", a.headObject)
	v1.DELETE("/objects/*name", a.deleteObject)

	v1.POST("/batch/exists", a.batchExists)
	v1.POST("/batch/get", a.batchGet)
	v1.POST("/batch/put", a.batchPut)
	v1.POST("/batch/delete", a.batchDelete)
	v1.POST("/batch/retention", a.batchRetention)

	v1.POST("/contexts", a.createContext)
	v1.GET("/contexts", a.listContexts)
	v1.GET("/contexts/:id", a.getContext)
	v1.PATCH("/contexts/:id", a.patchContext)
	v1.DELETE("/contexts/:id", a.deleteContext)

	v1.POST("/namespaces/clear", a.clearNamespace)

	v1.GET("/shm", a.shmInfo)
	v1.POST("/shm/:session/get", a.shmGet)
	v1.POST("/shm/:session/put", a.shmPut)

	v1.GET("/stats", a.getStats)
	v1.GET("/tiers", a.getTiers)
	v1.GET("/stats/history", a.getHistory)

	admin := v1.Group("", a.AdminOnly)
	admin.GET("/cluster", a.getCluster)
	admin.POST("/cluster/query", a.clusterQuery)
	admin.POST("/cluster/holders", a.clusterHolders)
	admin.POST("/cluster/pull", a.clusterPull)
	admin.GET("/cluster/nodes", a.clusterNodes)
	admin.GET("/cluster/hot", a.clusterHot)
	if a.opts.Mount != nil {
		a.opts.Mount(v1)
	}
	return r
}

// AdminOnly is middleware for mounted routes that need the admin role when
// authentication is on (with it off every caller is an admin).
func (a *API) AdminOnly(c *gin.Context) {
	if err := requireAdmin(principal(c)); err != nil {
		a.fail(c, err)
		c.Abort()
		return
	}
	c.Next()
}

// Errors only the router produces.
var (
	errNoRoute = fmt.Errorf("%w: unknown route", ErrNotFound)
	errMethod  = errors.New("server: method not allowed")
)

// fail answers with err's status and the JSON error body.
func (a *API) fail(c *gin.Context, err error) {
	status, code := apiError(err)
	switch {
	case errors.Is(err, errNoRoute):
		code = "no_route"
	case errors.Is(err, errMethod):
		status, code = http.StatusMethodNotAllowed, "method_not_allowed"
	case status == http.StatusUnauthorized:
		c.Header("WWW-Authenticate", `Bearer realm="yuebing"`)
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable:
		if c.Writer.Header().Get("Retry-After") == "" { // authenticate's is exact
			c.Header("Retry-After", "1")
		}
	case status == http.StatusInternalServerError:
		a.log.Error("server: request failed", "method", c.Request.Method, "route", c.FullPath(), "err", err)
	}
	c.Header("Cache-Control", "no-store")
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: err.Error()}})
}

func (a *API) recovered(c *gin.Context, v any) {
	a.log.Error("server: handler panicked", "method", c.Request.Method, "route", c.FullPath(), "panic", v)
	if !c.Writer.Written() {
		a.fail(c, fmt.Errorf("server: internal error"))
	}
}

// limit bounds each /v1 request in time: its context ends and its
// connection's read and write deadlines fall after RequestTimeout, so a
// slow client cannot hold a request, a pinned block or budget forever.
func (a *API) limit(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), a.limits.RequestTimeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	rc := http.NewResponseController(c.Writer)
	dl := time.Now().Add(a.limits.RequestTimeout)
	// Errors mean the writer cannot set deadlines (a test recorder); the
	// context still bounds the request.
	_ = rc.SetReadDeadline(dl)
	_ = rc.SetWriteDeadline(dl)
	c.Next()
}

// maxHeaderBytes bounds a request's line and header fields together, as
// net/http counts them; past it the answer is a JSON 414 (the line alone
// is over) or 431. The HTTP server reads up to headerReadBytes of them
// before answering by itself, a plain-text 431 and a closed connection:
// the margin between the two is what lets a request somewhat over the
// limit (a 100 KB key) get the API's error body, and headerReadBytes per
// connection, at most limits.max_connections of them, bounds the memory a
// request's headers can take.
const (
	maxHeaderBytes  = 64 << 10
	headerReadBytes = 2 * maxHeaderBytes
)

// limitHeaders refuses a request whose line and header fields are over
// maxHeaderBytes.
func (a *API) limitHeaders(c *gin.Context) {
	r := c.Request
	line := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 // two spaces, CRLF
	if line > maxHeaderBytes {
		a.fail(c, fmt.Errorf("%w: a request line of %d bytes, at most %d", ErrURITooLong, line, maxHeaderBytes))
		return
	}
	n := line + len("Host: \r\n") + len(r.Host) + 2 // the final CRLF
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // ": ", CRLF
		}
	}
	if n > maxHeaderBytes {
		a.fail(c, fmt.Errorf("%w: %d bytes of request line and header fields, at most %d", ErrHeadersTooLarge, n, maxHeaderBytes))
	}
}

const principalKey = "yuebing.principal"

// authenticate resolves the bearer token to a principal.
func (a *API) authenticate(c *gin.Context) {
	token := ""
	if h := c.GetHeader("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			a.fail(c, fmt.Errorf("%w: the Authorization header must be \"Bearer TOKEN\"", auth.ErrUnauthenticated))
			return
		}
		token = strings.TrimSpace(rest)
	}
	p, err := a.tokens.AuthenticateFrom(peerAddr(c.Request), token)
	if err != nil {
		retryAfter(c, err)
		a.fail(c, err)
		return
	}
	c.Set(principalKey, p)
	c.Next()
}

// registerAuthMetrics exports the counters of the tokens' throttle, which
// the HTTP API and the Redis front end share; nothing when authentication
// is off.
func registerAuthMetrics(reg *prometheus.Registry, tokens *auth.Tokens) error {
	th := tokens.Throttle()
	if th == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "yuebing_auth_failures_total", Help: "Failed authentications (a wrong token), HTTP and Redis protocol together.",
		}, func() float64 { return float64(th.Stats().Failures) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "yuebing_auth_throttled_total", Help: "Authentications refused unchecked because their address failed too often.",
		}, func() float64 { return float64(th.Stats().Refused) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// retryAfter tells a caller refused for its address's failed tokens, in
// whole seconds, when it may try again.
func retryAfter(c *gin.Context, err error) {
	var te *auth.ThrottledError
	if errors.As(err, &te) {
		c.Header("Retry-After", strconv.FormatInt(max(1, int64((te.RetryAfter+time.Second-1)/time.Second)), 10))
	}
}

// peerAddr is the address a request's failed authentications count
// against: the connection's peer. Forwarding headers (X-Forwarded-For)
// are the client's to write, so they are not believed.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{} // not an IP peer: one source of its own
	}
	return ap.Addr().Unmap()
}

func principal(c *gin.Context) auth.Principal {
	if p, ok := c.Get(principalKey); ok {
		return p.(auth.Principal)
	}
	panic("BUG: server: handler without the authenticate middleware")
}

// reserve takes n bytes of the in-flight budget, waiting at most
// QueueTimeout, and returns the function that gives them back.
func (a *API) reserve(ctx context.Context, n int64) (func(), error) {
	release, err := a.budget.Acquire(ctx, n)
	switch {
	case errors.Is(err, budget.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
	case errors.Is(err, budget.ErrExhausted):
		return nil, fmt.Errorf("%w: %v", ErrOverloaded, err)
	}
	return release, err
}

// decodeJSON reads a JSON request body of at most MaxJSONBytes into v.
// Unknown fields and trailing data are errors, so a misspelt field is
// reported instead of silently ignored.
func (a *API) decodeJSON(c *gin.Context, v any) error {
	body := http.MaxBytesReader(c.Writer, c.Request.Body, int64(a.limits.MaxJSONBytes))
	return decodeJSONBody(body, v)
}

func decodeJSONBody(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: JSON body over %d bytes (limits.max_json_bytes)", ErrTooLarge, mbe.Limit)
		}
		if err == io.EOF {
			return fmt.Errorf("%w: empty body", ErrBadJSON)
		}
		return fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON object", ErrBadJSON)
	}
	return nil
}

// Header names.
const (
	HeaderNamespace = "X-Yuebing-Namespace"
	HeaderCRC       = "X-Yuebing-Crc32c"
	HeaderTier      = "X-Yuebing-Tier"
	HeaderSize      = "X-Yuebing-Size"
)

// namespaceHeader returns the validated namespace header, "" when absent.
func namespaceHeader(c *gin.Context, required bool) (string, error) {
	ns := c.GetHeader(HeaderNamespace)
	if ns == "" {
		if required {
			return "", fmt.Errorf("%w: the %s header is required (tenant/model[#salt])", ErrBadRequest, HeaderNamespace)
		}
		return "", nil
	}
	if err := block.ValidateNamespace(ns); err != nil {
		return "", err
	}
	return ns, nil
}

func (a *API) tierName(level int) string {
	if tiers := a.store.Tiers(); level >= 0 && level < len(tiers) {
		return tiers[level].Name()
	}
	return ""
}

func (a *API) readyz(c *gin.Context) {
	if a.draining.Load() {
		a.fail(c, fmt.Errorf("%w: shutting down", ErrUnavailable))
		return
	}
	c.JSON(http.StatusOK, a.health("ready"))
}

// RESPLatency records one Redis command's time for the console's
// percentiles (resp.Options.Latency).
func (a *API) RESPLatency(d time.Duration) { a.respLatency.Observe(d) }
