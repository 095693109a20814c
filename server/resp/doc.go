// Package resp serves the Redis protocol (RESP2, and RESP3 after HELLO 3)
// over the block store, so that LMCache and every Redis client can use
// yuebing as a remote KV cache with no client code. docs/resp.md lists the
// commands and where they differ from Redis.
//
// The server wraps a tier.Hierarchy:
//
//	srv, err := resp.NewServer(resp.Options{Store: h, Tokens: tokens})
//	ln, err := net.Listen("tcp", "127.0.0.1:6380")
//	go srv.Serve(ln)          // returns nil after Shutdown
//	...
//	err = srv.Shutdown(ctx)   // idle clients closed, commands in progress finished
//	h.Flush(ctx)              // then keep DRAM-only values across a restart
//
// Keys. A key K of tenant T lives in namespace Options.Namespace(T),
// "T/redis" by default, so two tenants' identical key strings never meet.
// Each value is one immutable block, block.OpaqueKey(namespace, gen || K),
// where gen is a generation number unique to that write: a SET writes the
// new value beside the old one and an in-memory key table switches readers
// over in one step when it is complete, so a concurrent GET sees the old
// value or the new, and concurrent SETs of one key stream in parallel. The
// block's PutOptions.Meta holds a record ('R', version, namespace, K, gen,
// the deadline), from which NewServer rebuilds the key table after a
// restart.
//
// Memory. Requests are parsed with bounded buffers: a declared length is
// checked before anything is read or allocated; a SET value longer than
// 64 KiB goes from the socket straight into the block the store reserved
// for it; GET writes a value from the store's pinned view with one writev.
// Replies are written as they are produced, so a connection holds at most
// its buffers and the one value being written, and a client that stops
// reading for Options.StallTimeout is disconnected. The store evicts (LRU)
// when it is full, like Redis with maxmemory-policy allkeys-lru; a value
// larger than any tier gets -OOM.
//
// LMCache stores a chunk as "<k>kv_bytes" and "<k>metadata". A metadata key
// written while its payload is stored is tied to it: when either is evicted
// the other goes too, and the metadata reads as missing from the moment the
// payload leaves the store, so a client never finds metadata whose payload
// was dropped.
//
// A Server is safe for concurrent use. Each connection is served by one
// goroutine; the server also runs an expiry sweep and a deleter, stopped by
// Shutdown.
package resp
