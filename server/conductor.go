package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/errgroup"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/internal/httperr"
	"github.com/yuebing/yuebing/scheduler"
	"github.com/yuebing/yuebing/server/auth"
)

// ConductorAPI is the conductor's HTTP face over a scheduler.Driver. Register mounts it on
// any gin router, so the main server can embed it; Serve runs it alone.
type ConductorAPI struct {
	d      *scheduler.Driver
	reg    registry
	tokens *auth.Tokens // Handler's; nil: no authentication
	limits scheduler.Limits
	byID   func(id string) (scheduler.InstanceStatus, error)
}

// registry registers instances: the driver itself, or a router in front of
// it (router.Router's Register and Deregister), which keeps its engines'
// health with their registration in one state.
type registry interface {
	Register(scheduler.Instance) error
	Deregister(id string) error
}

// driverRegistry registers with the driver directly.
type driverRegistry struct{ d *scheduler.Driver }

func (r driverRegistry) Register(in scheduler.Instance) error { return r.d.AddInstance(in) }
func (r driverRegistry) Deregister(id string) error           { return r.d.RemoveInstance(id) }

// NewConductorAPI returns the API for d. Zero limits get their defaults.
// A driver a router schedules with takes NewRouterConductorAPI.
func NewConductorAPI(d *scheduler.Driver, l scheduler.Limits) (*ConductorAPI, error) {
	l.EnsureDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &ConductorAPI{d: d, reg: driverRegistry{d}, limits: l, byID: d.Instance}, nil
}

// Register mounts the conductor endpoints under /v1/conductor on r.
func (s *ConductorAPI) Register(r gin.IRouter) {
	g := r.Group("/conductor")
	g.POST("/instances", s.addInstance)
	g.GET("/instances", s.listInstances)
	g.GET("/instances/:id", s.getInstance)
	g.DELETE("/instances/:id", s.removeInstance)
	g.POST("/instances/:id/heartbeat", s.heartbeat)
	g.POST("/instances/:id/blocks", s.blocks)
	g.POST("/schedule", s.schedule)
	g.POST("/query", s.query)
	g.POST("/requests/:id/prefilled", s.prefilled)
	g.POST("/requests/:id/finished", s.finished)
	g.GET("/stats", s.stats)
}

// Handler returns a standalone handler: the conductor API plus /healthz.
func (s *ConductorAPI) Handler() http.Handler {
	r := gin.New()
	r.Use(gin.Recovery())
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	s.Register(r.Group("/v1", authenticator(s.tokens), conductorAdminOnly))
	r.NoRoute(func(c *gin.Context) {
		conductorError(c, http.StatusNotFound, "not_found", "no such endpoint: "+c.Request.Method+" "+c.Request.URL.Path)
	})
	return r
}

// Serve runs the standalone service and the driver on ln until ctx is
// done, then shuts down gracefully: it stops accepting, and waits up to 5 s
// for requests in progress.
func (s *ConductorAPI) Serve(ctx context.Context, ln net.Listener) error {
	return serveHTTP(ctx, ln, s.Handler(), s.d.Run)
}

// serveHTTP serves h on ln and runs loop beside it until ctx ends or
// either fails; then it stops accepting and waits up to 5 s for requests
// in progress.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, loop func(context.Context) error) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return loop(gctx) })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}

// listenStandalone listens on addr for a conductor or router run alone
// and names the bound address on banner (default os.Stderr), the line
// scripts and tests wait for.
func listenStandalone(ctx context.Context, addr string, banner io.Writer) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server: conductor: listen %s: %w", addr, err)
	}
	if banner == nil {
		banner = os.Stderr
	}
	fmt.Fprintf(banner, "conductor listening on http://%s\n", ln.Addr())
	return ln, nil
}

// resolveStandalone checks the configuration of a conductor or router run
// alone, every problem at once, each named by name (default
// "conductor." + its YAML name), and loads its tokens.
func resolveStandalone(cc ConductorConfig, name func(string) string, listen, tokensFile string, insecure bool) (ConductorConfig, *auth.Tokens, []error) {
	cc.ensureDefaults()
	var errs []error
	named := name
	if named == nil {
		named = func(f string) string { return "conductor." + f }
	}
	cc.resolve(func(field, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if field != "" {
			msg = named(field) + ": " + msg
		}
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, msg))
	})
	tokens, err := standaloneTokens(listen, tokensFile, insecure, name)
	if err != nil {
		errs = append(errs, err)
	}
	return cc, tokens, errs
}

// ConductorOptions configure the conductor run alone (`yuebing conductor`).
type ConductorOptions struct {
	// Listen is the HTTP address, host:port; port 0 picks a free one.
	Listen string
	// Config is the conductor's configuration, as a node's conductor
	// section; Enabled is ignored. Zero fields get their defaults.
	Config ConductorConfig
	// MigrationQueue bounds pull plans waiting for the migrator. Default:
	// scheduler.DriverOptions'.
	MigrationQueue int
	// Limits bound what one request may carry. Zero fields get their
	// defaults.
	Limits scheduler.Limits
	// Banner receives one line naming the bound address. Default
	// os.Stderr.
	Banner io.Writer
	// FieldName names a ConductorConfig field (its YAML name) in errors:
	// the command line passes its flag's name. Default "conductor." + the
	// YAML name; "auth.tokens_file" and "insecure" as they are.
	FieldName func(yamlName string) string
	// TokensFile authenticates callers as a node's auth.tokens_file does
	// (server/auth): with it, every /v1/conductor endpoint takes an admin
	// token, as a node's embedded conductor does. Default "": no
	// authentication, which a Listen address off loopback refuses unless
	// Insecure.
	TokensFile string
	// Insecure allows a Listen address off loopback without TokensFile:
	// anyone who reaches it may place, register and remove instances.
	Insecure bool
	// Router, with engines, puts the conductor in front of them as an
	// OpenAI-compatible router: RunConductor then runs RunRouter.
	Router RouterConfig
}

// RunConductor runs the conductor alone: the driver and its HTTP API on
// o.Listen, until ctx ends; then it shuts down as Serve does. Invalid
// options are an error wrapping ErrInvalidConfig, each problem named by its
// flag.
func RunConductor(ctx context.Context, o ConductorOptions) error {
	if o.Router.Enabled() {
		return RunRouter(ctx, RouterOptions{
			Listen: o.Listen, Router: o.Router, Conductor: o.Config, Banner: o.Banner,
			FieldName: o.FieldName, TokensFile: o.TokensFile, Insecure: o.Insecure,
		})
	}
	cc, tokens, errs := resolveStandalone(o.Config, o.FieldName, o.Listen, o.TokensFile, o.Insecure)
	o.Limits.EnsureDefaults()
	if err := o.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d, err := scheduler.NewDriver(scheduler.DriverOptions{Core: cc.Options, MigrationQueue: o.MigrationQueue})
	if err != nil {
		return err
	}
	svc, err := NewConductorAPI(d, o.Limits)
	if err != nil {
		return err
	}
	svc.tokens = tokens
	ln, err := listenStandalone(ctx, o.Listen, o.Banner)
	if err != nil {
		return err
	}
	return svc.Serve(ctx, ln)
}

// standaloneTokens loads the tokens of a conductor or router run alone,
// and refuses a listener off loopback without them unless insecure, as a
// node's configuration does (Config.Validate). name names a field by its
// YAML name, nil naming it as is.
func standaloneTokens(listen, file string, insecure bool, name func(string) string) (*auth.Tokens, error) {
	if name == nil {
		name = func(f string) string { return f }
	}
	if file != "" {
		t, err := auth.Load(file)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, name("auth.tokens_file"), err)
		}
		return t, nil
	}
	if !insecure && !isLoopback(listen) {
		return nil, fmt.Errorf("%w: %q is not a loopback address and authentication is off: set %s or %s",
			ErrInvalidConfig, listen, name("auth.tokens_file"), name("insecure"))
	}
	return nil, nil
}

// authenticator resolves a bearer token to a principal for the handlers
// after it, as the node's API does; without tokens every caller is
// auth.Open and the Authorization header is not read (the standalone
// router passes it on to engines).
func authenticator(tokens *auth.Tokens) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !tokens.Enabled() {
			c.Set(principalKey, auth.Open)
			c.Next()
			return
		}
		token := ""
		if h := c.GetHeader("Authorization"); h != "" {
			scheme, rest, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				conductorFail(c, fmt.Errorf("%w: the Authorization header must be \"Bearer TOKEN\"", auth.ErrUnauthenticated))
				return
			}
			token = strings.TrimSpace(rest)
		}
		p, err := tokens.AuthenticateFrom(peerAddr(c.Request), token)
		if err != nil {
			retryAfter(c, err)
			conductorFail(c, err)
			return
		}
		c.Set(principalKey, p)
		c.Next()
	}
}

// conductorAdminOnly lets admins through (every caller, without tokens):
// placement and registration are infrastructure's.
func conductorAdminOnly(c *gin.Context) {
	if err := requireAdmin(principal(c)); err != nil {
		conductorFail(c, err)
		return
	}
	c.Next()
}

// conductorFail answers err from the server's one error table.
func conductorFail(c *gin.Context, err error) {
	status, code := apiError(err)
	conductorError(c, status, code, err.Error())
}

func (s *ConductorAPI) body(c *gin.Context) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.limits.MaxBodyBytes))
	if err != nil {
		conductorFail(c, err)
		return nil, false
	}
	return b, true
}

func (s *ConductorAPI) addInstance(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	in, err := scheduler.DecodeInstance(b)
	if err == nil {
		err = s.reg.Register(in)
	}
	if err != nil {
		conductorFail(c, err)
		return
	}
	st, err := s.byID(in.ID)
	if errors.Is(err, scheduler.ErrUnknownInstance) {
		// A router's engine registered while its probes fail: it joins
		// the scheduler when one answers.
		c.JSON(http.StatusAccepted, gin.H{"id": in.ID, "status": "registered; scheduled once a probe of it answers"})
		return
	}
	if err != nil {
		conductorFail(c, err)
		return
	}
	c.JSON(http.StatusCreated, statusJSON(st))
}

func (s *ConductorAPI) listInstances(c *gin.Context) {
	all := s.d.Instances()
	out := make([]instanceStatusJSON, len(all))
	for i, st := range all {
		out[i] = statusJSON(st)
	}
	c.JSON(http.StatusOK, gin.H{"instances": out})
}

func (s *ConductorAPI) getInstance(c *gin.Context) {
	st, err := s.byID(c.Param("id"))
	if err != nil {
		conductorFail(c, err)
		return
	}
	c.JSON(http.StatusOK, statusJSON(st))
}

func (s *ConductorAPI) removeInstance(c *gin.Context) {
	if err := s.reg.Deregister(c.Param("id")); err != nil {
		conductorFail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *ConductorAPI) heartbeat(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	l, err := scheduler.DecodeHeartbeat(b)
	if err == nil {
		err = s.d.Heartbeat(c.Param("id"), l)
	}
	if err != nil {
		conductorFail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *ConductorAPI) blocks(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	u, err := scheduler.DecodeBlockUpdate(b, s.limits)
	if err == nil {
		err = s.d.UpdateBlocks(c.Param("id"), u)
	}
	if err != nil {
		conductorFail(c, err)
		return
	}
	st, err := s.byID(c.Param("id"))
	if err != nil {
		conductorFail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": st.ID, "blocks": st.Blocks})
}

func (s *ConductorAPI) schedule(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	req, err := scheduler.DecodeScheduleRequest(b, s.limits, s.d.Options().BlockSize)
	if err != nil {
		conductorFail(c, err)
		return
	}
	d, err := s.d.Schedule(req)
	if err != nil {
		conductorFail(c, err)
		return
	}
	est := estimatesOf(d.Estimates)
	if !d.Accepted() {
		msg := "estimated TTFT exceeds the TTFT SLO on every prefill instance"
		if d.Rejected == scheduler.ReasonTBT {
			msg = "the decode batch would exceed the TBT SLO"
		}
		c.Header("Retry-After", "1")
		c.AbortWithStatusJSON(http.StatusTooManyRequests, conductorRejection{Error: rejectionDetail{
			Code: "overloaded", Type: httperr.OpenAIType(http.StatusTooManyRequests), Message: msg, Reason: d.Rejected, Estimates: &est, Prefill: d.Prefill, Decode: d.Decode,
		}})
		return
	}
	resp := scheduleResponse{
		RequestID:         d.RequestID,
		Prefill:           instanceRef{d.Prefill, d.PrefillAddr},
		PrefixTokens:      d.PrefixTokens,
		LocalPrefixTokens: d.LocalPrefixTokens,
		BestPrefixTokens:  d.BestPrefixTokens,
		BestHolder:        d.BestHolder,
		Estimates:         est,
	}
	if d.Decode != "" {
		resp.Decode = &instanceRef{d.Decode, d.DecodeAddr}
	}
	if d.Pull != nil {
		resp.Pull = &pullJSON{From: instanceRef{d.Pull.From, d.Pull.FromAddr}, To: d.Pull.To, Keys: d.Pull.Keys, Tokens: d.Pull.Tokens}
	}
	c.JSON(http.StatusOK, resp)
}

func (s *ConductorAPI) query(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	keys, err := scheduler.DecodeQueryRequest(b, s.limits, s.d.Options().BlockSize)
	if err != nil {
		conductorFail(c, err)
		return
	}
	ms := s.d.Query(keys)
	if ms == nil {
		ms = []scheduler.InstanceMatch{}
	}
	c.JSON(http.StatusOK, gin.H{"blocks": len(keys), "instances": ms})
}

func (s *ConductorAPI) prefilled(c *gin.Context) {
	if err := s.d.PrefillDone(c.Param("id")); err != nil {
		conductorFail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *ConductorAPI) finished(c *gin.Context) {
	if err := s.d.Finished(c.Param("id")); err != nil {
		conductorFail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// conductorRejection is the body of a 429: the error, and why, with the
// estimates that decided it.
type conductorRejection struct {
	Error rejectionDetail `json:"error"`
}

type rejectionDetail struct {
	Code      string           `json:"code"`
	Type      string           `json:"type"`
	Message   string           `json:"message"`
	Reason    scheduler.Reason `json:"reason,omitempty"`
	Estimates *estimatesJSON   `json:"estimates,omitempty"`
	Prefill   string           `json:"prefill,omitempty"`
	Decode    string           `json:"decode,omitempty"`
}

func conductorError(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Type: httperr.OpenAIType(status), Message: msg}})
}

// Wire forms of responses. Durations are seconds as floats.

type estimatesJSON struct {
	TransferS float64 `json:"transfer_s"`
	QueueS    float64 `json:"queue_s"`
	PrefillS  float64 `json:"prefill_s"`
	TTFTS     float64 `json:"ttft_s"`
	TBTS      float64 `json:"tbt_s"`
}

func estimatesOf(e scheduler.Estimates) estimatesJSON {
	return estimatesJSON{e.Transfer.Seconds(), e.Queue.Seconds(), e.Prefill.Seconds(), e.TTFT.Seconds(), e.TBT.Seconds()}
}

type instanceRef struct {
	ID   string `json:"id"`
	Addr string `json:"addr,omitempty"`
}

type pullJSON struct {
	From   instanceRef `json:"from"`
	To     string      `json:"to"`
	Keys   []block.Key `json:"keys"`
	Tokens int         `json:"tokens"`
}

type scheduleResponse struct {
	RequestID         string        `json:"request_id"`
	Prefill           instanceRef   `json:"prefill"`
	Decode            *instanceRef  `json:"decode,omitempty"`
	PrefixTokens      int           `json:"prefix_tokens"`
	LocalPrefixTokens int           `json:"local_prefix_tokens"`
	BestPrefixTokens  int           `json:"best_prefix_tokens"`
	BestHolder        string        `json:"best_holder,omitempty"`
	Pull              *pullJSON     `json:"pull,omitempty"`
	Estimates         estimatesJSON `json:"estimates"`
}

type instanceStatusJSON struct {
	ID             string         `json:"id"`
	Addr           string         `json:"addr,omitempty"`
	Role           scheduler.Role `json:"role"`
	Capacity       int64          `json:"capacity,omitempty"`
	Blocks         int64          `json:"blocks"`
	QueueS         float64        `json:"queue_s"`
	Batch          int            `json:"batch"`
	KVTokens       int64          `json:"kv_tokens"`
	TBTS           float64        `json:"tbt_s"`
	Load           float64        `json:"load"`
	Scheduled      int64          `json:"scheduled"`
	SinceHeartbeat float64        `json:"since_heartbeat_s"`
}

func statusJSON(s scheduler.InstanceStatus) instanceStatusJSON {
	return instanceStatusJSON{s.ID, s.Addr, s.Role, s.Capacity, s.Blocks, s.QueueTime.Seconds(), s.Batch, s.KVTokens, s.TBT.Seconds(), s.Load, s.Scheduled, s.SinceHeartbeat.Seconds()}
}
