// Package sieve is a fixed-size cache with SIEVE eviction (Zhang et al.,
// NSDI'24): a FIFO queue plus one "visited" bit per entry and a hand that
// sweeps from the tail, clearing bits, and evicts the first unvisited entry.
// A hit only sets a bit, so lookups never reorder the queue; that is why the
// transports use it for their endpoint pools, where lookups are hot and
// evictions rare. It is the one SIEVE of the tree: tier/policy's SIEVE
// eviction policy is an unbounded Cache the tier evicts from.
//
//	c := sieve.New[string, *conn](64)
//	if ep, ok := c.Get(key); ok { ... }
//	if k, old, evicted := c.Add(key, ep); evicted { old.Close() }
//
// A Cache is not safe for concurrent use; the caller holds a lock, and runs
// eviction work (closing a connection) after releasing it.
package sieve
