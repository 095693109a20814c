// Package enginesim is a simulator of a vLLM-style inference engine, for
// measuring what yuebing saves an engine end to end. It is not a model: the
// time a prefill takes comes from the scheduler's prefill profile (time
// spent, not FLOPs run) and decoding is a fixed step per iteration, but the
// KV cache is real bytes, deterministic from the tokens (Fill), kept in a
// paged pool on an adapter.Device (the HBM tier; adapter/hbmsim here) with
// the engine's own prefix cache, and moved to and from a real yuebing node
// through the adapter: Lookup, layer-wise Load overlapped with the layer's
// compute, Save as each layer completes. Every loaded layer is checked
// against the bytes the tokens imply, so a wrong load is counted, never
// silently used.
//
// An Engine runs one scheduling loop (the GPU): it prefills one request at a
// time, then takes a decode step for every running request (continuous
// batching). Handler serves it as an OpenAI-compatible HTTP API
// (POST /v1/completions with prompt token ids, streaming with SSE, /health,
// /metrics); `yuebing engine-sim` runs that, and `yuebing bench e2e` replays
// a Mooncake trace against several engines in one process.
//
//	e, _ := enginesim.New(enginesim.Options{Layout: layout, Namespace: "acme/sim", Connector: conn})
//	go e.Run(ctx)
//	res, _ := e.Submit(ctx, enginesim.Request{Tokens: prompt, MaxTokens: 16})
//	fmt.Println(res.TTFT, res.PoolHitTokens)
package enginesim
