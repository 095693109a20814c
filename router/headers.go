package router

import (
	"context"
	"net/http"
)

// passed are the client's request headers an engine sees: request ids and
// W3C trace context, so an engine's logs and traces join the client's.
var passed = []string{"X-Request-Id", "Traceparent", "Tracestate"}

type clientHeadersKey struct{}

// WithClientHeaders returns ctx carrying what of the client's request
// headers Serve passes on to the engine: request ids and trace context,
// and, when withAuth, the client's Authorization (an engine started with
// an API key, such as vLLM's --api-key, checks it). A front end that
// authenticates clients with its own tokens passes withAuth false, so its
// tokens never reach engines; Options.EngineAPIKey then authenticates the
// router to them.
func WithClientHeaders(ctx context.Context, h http.Header, withAuth bool) context.Context {
	out := make(http.Header, len(passed)+1)
	for _, k := range passed {
		if v := h.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	if withAuth {
		if v := h.Get("Authorization"); v != "" {
			out.Set("Authorization", v)
		}
	}
	return context.WithValue(ctx, clientHeadersKey{}, out)
}

// passHeaders sets on req, a request to an engine, the client headers ctx
// carries and the engine API key.
func (r *Router) passHeaders(ctx context.Context, req *http.Request) {
	if h, ok := ctx.Value(clientHeadersKey{}).(http.Header); ok {
		for k, v := range h {
			req.Header[k] = v
		}
	}
	if r.opts.EngineAPIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.opts.EngineAPIKey)
	}
}

// Caller is who a request is placed for, as a front end that
// authenticates clients knows it (WithCaller). The zero Caller is the
// engines' own tenant: Options.Namespace, every detail answered.
type Caller struct {
	// Namespace keys the prompt, "tenant/model"; "" means
	// Options.Namespace, under which the engines' KV events and the pool's
	// blocks are keyed. A tenant's own namespace keeps its prompts apart
	// from every other's: it matches only the router's own record of where
	// that tenant's prompts went, never another tenant's.
	Namespace string
	// HideHits leaves out of the answer the headers that tell how the
	// router placed the request (HeaderEngine, HeaderPredictedTTFT,
	// HeaderPrefixTokens): how much of the prompt was counted as cached,
	// which may be so because another tenant sent it (engines' events
	// carry no tenant).
	HideHits bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c, for Serve and Place.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}
