// Package client is the Go client of a yuebing node's HTTP API
// (docs/api.md): blocks under chained keys or opaque names, batches,
// the context cache and the admin endpoints.
//
// A Client is safe for concurrent use and reuses connections. Block bodies
// are streamed both ways (PutStream, Open); Put and Get are the
// whole-block conveniences and verify CRC-32C end to end. Failures wrap a
// sentinel per kind, so callers test them with errors.Is:
//
//	c, err := client.New("http://127.0.0.1:8080", client.Options{Token: token})
//	keys, err := block.ChainKeys("acme/llama-3-70b", 256, tokens)
//	m, err := c.Exists(ctx, "acme/llama-3-70b", keys)      // m.PrefixLen blocks are cached
//	_, err = c.Put(ctx, "acme/llama-3-70b", keys[m.PrefixLen], kv)
//	data, info, err := c.Get(ctx, keys[0], client.GetOptions{})
//	if errors.Is(err, client.ErrNotFound) {
//		// recompute
//	}
//
// On the node's host, OpenStaging opens a shared-memory session (the node's
// /v1/shm socket and a sealed memfd both map): its GetBatch and PutBatch
// move blocks through the segment instead of HTTP bodies, verified by
// CRC-32C the same way.
//
// The package imports only package block of this module (and x/sys/unix for
// the shared-memory session).
package client
