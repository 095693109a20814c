// Package pool is `yuebing bench pool`: a trace replayed through each
// node's local cache (round robin, best prefix) and through one global pool
// of the same total size, to show what sharing the cache across nodes gains.
package pool
