package scheduler

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/errgroup"
)

// Service is the conductor's HTTP API over a Driver. Register mounts it on
// any gin router, so the main server can embed it; Serve runs it alone.
type Service struct {
	d      *Driver
	limits Limits
	byID   func(id string) (InstanceStatus, error)
}

// NewService returns the API for d. Zero limits get their defaults.
func NewService(d *Driver, l Limits) (*Service, error) {
	l.EnsureDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Service{d: d, limits: l, byID: d.Instance}, nil
}

// Register mounts the conductor endpoints under /v1/conductor on r.
func (s *Service) Register(r gin.IRouter) {
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
func (s *Service) Handler() http.Handler {
	r := gin.New()
	r.Use(gin.Recovery())
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	s.Register(r.Group("/v1"))
	r.NoRoute(func(c *gin.Context) {
		writeError(c, http.StatusNotFound, "not_found", "no such endpoint: "+c.Request.Method+" "+c.Request.URL.Path)
	})
	return r
}

// Serve runs the standalone service and the driver on ln until ctx is
// done, then shuts down gracefully: it stops accepting, and waits up to 5 s
// for requests in progress.
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.d.Run(gctx) })
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

// ListenAndServe listens on addr (host:port) and calls Serve.
func (s *Service) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Set on rejections (429).
	Reason    Reason         `json:"reason,omitempty"`
	Estimates *estimatesJSON `json:"estimates,omitempty"`
	Prefill   string         `json:"prefill,omitempty"`
	Decode    string         `json:"decode,omitempty"`
}

func writeError(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

// fail maps an error to its status: the one place that does.
func fail(c *gin.Context, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(c, http.StatusRequestEntityTooLarge, "too_large", err.Error())
	case errors.Is(err, ErrUnknownInstance), errors.Is(err, ErrUnknownRequest):
		writeError(c, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, ErrDuplicate):
		writeError(c, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, ErrTooManyInstances):
		writeError(c, http.StatusConflict, "too_many_instances", err.Error())
	case errors.Is(err, ErrNoPrefill):
		writeError(c, http.StatusServiceUnavailable, "no_instances", err.Error())
	case errors.Is(err, ErrRequest), errors.Is(err, ErrInstance):
		writeError(c, http.StatusBadRequest, "bad_request", err.Error())
	default:
		writeError(c, http.StatusInternalServerError, "internal", err.Error())
	}
}

func (s *Service) body(c *gin.Context) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, s.limits.MaxBodyBytes))
	if err != nil {
		fail(c, err)
		return nil, false
	}
	return b, true
}

func (s *Service) addInstance(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	in, err := DecodeInstance(b)
	if err == nil {
		err = s.d.AddInstance(in)
	}
	if err != nil {
		fail(c, err)
		return
	}
	st, err := s.byID(in.ID)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, statusJSON(st))
}

func (s *Service) listInstances(c *gin.Context) {
	all := s.d.Instances()
	out := make([]instanceStatusJSON, len(all))
	for i, st := range all {
		out[i] = statusJSON(st)
	}
	c.JSON(http.StatusOK, gin.H{"instances": out})
}

func (s *Service) getInstance(c *gin.Context) {
	st, err := s.byID(c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, statusJSON(st))
}

func (s *Service) removeInstance(c *gin.Context) {
	if err := s.d.RemoveInstance(c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Service) heartbeat(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	l, err := DecodeHeartbeat(b)
	if err == nil {
		err = s.d.Heartbeat(c.Param("id"), l)
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Service) blocks(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	u, err := DecodeBlockUpdate(b, s.limits)
	if err == nil {
		err = s.d.UpdateBlocks(c.Param("id"), u)
	}
	if err != nil {
		fail(c, err)
		return
	}
	st, err := s.byID(c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": st.ID, "blocks": st.Blocks})
}

func (s *Service) schedule(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	req, err := DecodeScheduleRequest(b, s.limits, s.d.Options().BlockSize)
	if err != nil {
		fail(c, err)
		return
	}
	d, err := s.d.Schedule(req)
	if err != nil {
		fail(c, err)
		return
	}
	est := estimatesOf(d.Estimates)
	if !d.Accepted() {
		msg := "estimated TTFT exceeds the TTFT SLO on every prefill instance"
		if d.Rejected == ReasonTBT {
			msg = "the decode batch would exceed the TBT SLO"
		}
		c.Header("Retry-After", "1")
		c.AbortWithStatusJSON(http.StatusTooManyRequests, errorBody{Error: errorDetail{
			Code: "overloaded", Message: msg, Reason: d.Rejected, Estimates: &est, Prefill: d.Prefill, Decode: d.Decode,
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

func (s *Service) query(c *gin.Context) {
	b, ok := s.body(c)
	if !ok {
		return
	}
	keys, err := DecodeQueryRequest(b, s.limits, s.d.Options().BlockSize)
	if err != nil {
		fail(c, err)
		return
	}
	ms := s.d.Query(keys)
	if ms == nil {
		ms = []InstanceMatch{}
	}
	c.JSON(http.StatusOK, gin.H{"blocks": len(keys), "instances": ms})
}

func (s *Service) prefilled(c *gin.Context) {
	if err := s.d.PrefillDone(c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Service) finished(c *gin.Context) {
	if err := s.d.Finished(c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
