// Package router is the Conductor as the front door: an OpenAI-compatible
// router that places each request on an inference engine by Algorithm 1
// over live state, then forwards it.
//
// The state is what the system reports, not what the router assumes:
// engines' KV caches from their vLLM KV events (package kvevents), the
// pool's holdings from the cluster index (queried per request), engines'
// queues from their /metrics. Each decision also counts the prompt's
// blocks as cached on the chosen engine for a short TTL (a speculative
// entry), since the engine holds them before its events say so; otherwise
// a burst of one prefix would scatter. Pull plans copy prefixes through
// the cluster (PullMigrator).
//
// A decision is Prepare (read the body, key the prompt: no shared state)
// then Decide (match each engine's blocks under its own lock, Algorithm 1,
// the speculative entry); Place does both. Engines' blocks live in the
// router, one table per engine, not in the scheduler: event streams and
// decisions never queue behind one lock.
//
// The router has no HTTP server of its own: the server package mounts
// Serve behind /v1/completions and /v1/chat/completions.
//
//	r, err := router.New(router.Options{
//		Model:     "llama-3-8b",
//		Namespace: "acme/llama-3-8b",
//		Engines:   []router.Engine{{ID: "e0", URL: "http://10.0.0.5:8000", Events: "tcp://10.0.0.5:5557"}},
//	})
//	go r.Run(ctx)
//	err = r.Serve(ctx, router.Completions, body, w) // nil once w has the answer
package router
