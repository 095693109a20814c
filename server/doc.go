// Package server is a yuebing cache node: the block store (tier) behind an
// HTTP API, with tenants, a context cache and Prometheus metrics.
//
// Run is what `yuebing serve` calls:
//
//	cfg := server.DefaultConfig()
//	cfg.DataDir = "/var/lib/yuebing"
//	err := server.Run(ctx, cfg) // until ctx ends; then a graceful shutdown
//
// Start returns a running *Node instead, for tests and embedding.
//
// The API (docs/api.md, docs/api/openapi.yaml) stores blocks under chained
// keys (PUT /v1/blocks/{key}) or opaque names (PUT /v1/objects/{name}),
// streams them back zero-copy from the DRAM arena, answers prefix matches
// and batches, and pins context-cache entries for a TTL. Every block put
// through the API carries a small metadata record naming its namespace, so
// a tenant never reads, deletes or overwrites another tenant's block, and
// cannot tell that one exists.
//
// Every failure reaches the client through one mapping (apiError) from the
// packages' sentinel errors to an HTTP status and a JSON body
// {"error":{"code":"...","message":"..."}}.
//
// Memory is bounded by configuration: block bodies stream into the store,
// heap copies (bodies bound for SSD, blocks read from it) are charged to
// Limits.MaxInflightBytes, one budget (server/budget) that the Redis front
// end and the cluster read path draw on too; JSON bodies, batches and
// connections have limits of their own, and requests time out.
package server
