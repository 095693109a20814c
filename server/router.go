package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/router"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server/auth"
)

// RouterConfig configures the conductor as an OpenAI-compatible router in
// front of inference engines (docs/conductor.md): router.Options, whose
// fields carry their YAML names, so an option is declared once. The
// conductor section's knobs (policy, rejection, SLOs, bandwidth) drive its
// Algorithm 1, in place of Scheduler.
type RouterConfig router.Options

// Enabled reports whether the configuration asks for a router.
func (c RouterConfig) Enabled() bool { return len(c.Engines) > 0 }

// options returns the router's options under the conductor's scheduling.
func (c RouterConfig) options(cc ConductorConfig) router.Options {
	o := router.Options(c)
	o.Scheduler = cc.Options
	return o
}

// NewRouterConductorAPI returns the conductor API over r's scheduler, whose
// registrations go through r: POST /v1/conductor/instances registers one
// of r's engines again and DELETE takes it out (router.Router.Register and
// Deregister), in one state with what r's probes find.
func NewRouterConductorAPI(r *router.Router, l scheduler.Limits) (*ConductorAPI, error) {
	s, err := NewConductorAPI(r.Driver(), l)
	if err != nil {
		return nil, err
	}
	s.reg = r
	return s, nil
}

// RouterAPI is the OpenAI face of a router.Router.
type RouterAPI struct {
	r *router.Router
	// passAuth passes the client's Authorization on to engines: only
	// where the front end does not check tokens of its own.
	passAuth bool
	maxBody  int64
}

// NewRouterAPI returns the API over r.
func NewRouterAPI(r *router.Router) *RouterAPI {
	return &RouterAPI{r: r, maxBody: r.Options().MaxBodyBytes}
}

// Register mounts POST /completions, POST /chat/completions and GET
// /models on r (a /v1 group).
func (s *RouterAPI) Register(r gin.IRouter) {
	r.POST("/completions", func(c *gin.Context) { s.serve(c, router.Completions) })
	r.POST("/chat/completions", func(c *gin.Context) { s.serve(c, router.ChatCompletions) })
	r.GET("/models", s.models)
}

func (s *RouterAPI) serve(c *gin.Context, kind router.Kind) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.maxBody))
	if err != nil {
		routerFail(c, err)
		return
	}
	ctx := router.WithClientHeaders(c.Request.Context(), c.Request.Header, s.passAuth)
	ctx = router.WithCaller(ctx, s.caller(principal(c)))
	if err := s.r.Serve(ctx, kind, body, c.Writer); err != nil {
		routerFail(c, err)
	}
}

// caller keys a tenant's prompts under its own namespace, so no tenant
// learns from the router whether another sent a prompt. Admins (every
// caller, without authentication) are the engines' operators: their
// prompts are keyed under the router's namespace, the engines' own, where
// the engines' KV events and the pool's blocks are, and they see every
// detail. The tenant that namespace names shares it, its requests matching
// what the engines report, but the engines' events carry no tenant: what
// they report cached may be another tenant's prompt, so the decision's
// headers are not answered to it (docs/conductor.md).
func (s *RouterAPI) caller(p auth.Principal) router.Caller {
	ns := s.r.Options().Namespace
	switch {
	case p.IsAdmin():
		return router.Caller{}
	case p.Tenant == block.Tenant(ns):
		return router.Caller{HideHits: true}
	}
	_, model, _ := strings.Cut(ns, "/")
	return router.Caller{Namespace: p.Tenant + "/" + model}
}

// routerFail answers err from the server's one error table; an early
// rejection carries Retry-After in whole seconds.
func routerFail(c *gin.Context, err error) {
	var ov *router.Overloaded
	if errors.As(err, &ov) {
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(ov.RetryAfter.Seconds()))))
	}
	conductorFail(c, err)
}

func (s *RouterAPI) models(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": []gin.H{{
		"id": s.r.Model(), "object": "model", "created": 0, "owned_by": "yuebing",
	}}})
}

// RouterOptions configure the router run alone (`yuebing conductor` with
// engines).
type RouterOptions struct {
	// Listen is the HTTP address, host:port; port 0 picks a free one.
	Listen string
	// Router and Conductor configure it; Conductor's zero fields get
	// their defaults.
	Router    RouterConfig
	Conductor ConductorConfig
	// Banner receives one line naming the bound address. Default os.Stderr.
	Banner io.Writer
	// FieldName names a ConductorConfig field in errors; see
	// ConductorOptions. It also names "auth.tokens_file" and "insecure".
	FieldName func(yamlName string) string
	// TokensFile and Insecure guard the HTTP surface as a node's
	// auth.tokens_file and insecure do: see ConductorOptions.
	TokensFile string
	Insecure   bool
}

// RunRouter runs the router alone until ctx ends: the OpenAI endpoints,
// the conductor's status endpoints over the router's scheduler, /healthz
// and /metrics. Invalid options are an error wrapping ErrInvalidConfig.
func RunRouter(ctx context.Context, o RouterOptions) error {
	cc, tokens, errs := resolveStandalone(o.Conductor, o.FieldName, o.Listen, o.TokensFile, o.Insecure)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r, err := router.New(o.Router.options(cc))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	h, err := routerHandler(r, tokens)
	if err != nil {
		return err
	}
	ln, err := listenStandalone(ctx, o.Listen, o.Banner)
	if err != nil {
		return err
	}
	return serveHTTP(ctx, ln, h, func(ctx context.Context) error {
		r.Run(ctx)
		return nil
	})
}

// routerHandler is the standalone router's HTTP surface. With tokens, the
// OpenAI endpoints take any known token and /v1/conductor an admin's, as on
// a node; without, every caller is auth.Open and the client's
// Authorization goes on to the engines (an engine's own --api-key then
// guards them).
func routerHandler(r *router.Router, tokens *auth.Tokens) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, c := range append(r.Collectors(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	status, err := NewRouterConductorAPI(r, scheduler.Limits{})
	if err != nil {
		return nil, err
	}
	g := gin.New()
	g.Use(gin.Recovery())
	health := func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }
	g.GET("/healthz", health)
	g.GET("/health", health) // vLLM's name, which engines' probes and clients wait on
	mh := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	g.GET("/metrics", func(c *gin.Context) { mh.ServeHTTP(c.Writer, c.Request) })
	v1 := g.Group("/v1", authenticator(tokens))
	ra := NewRouterAPI(r)
	// No tokens of its own: the client's are the engines'. With tokens,
	// they never reach an engine.
	ra.passAuth = !tokens.Enabled()
	ra.Register(v1)
	status.Register(v1.Group("", conductorAdminOnly))
	g.NoRoute(func(c *gin.Context) {
		conductorError(c, http.StatusNotFound, "not_found", "no such endpoint: "+c.Request.Method+" "+c.Request.URL.Path)
	})
	g.HandleMethodNotAllowed = true
	g.NoMethod(func(c *gin.Context) {
		conductorError(c, http.StatusMethodNotAllowed, "method_not_allowed", c.Request.Method+" is not allowed on "+c.Request.URL.Path)
	})
	return g, nil
}
