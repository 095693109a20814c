// Package keytable is a map from block keys to small values, for the hot
// paths that look up every key of a prompt: the conductor's holder sets
// and the router's per-engine block tables.
//
// It is an open-addressing table with linear probing, kept at most half
// full, whose slots hold the key as four words and the value inline. A Go
// map hashes and compares 32-byte keys generically, keeps its control
// bytes apart from its slots, and needs a second lookup to store; on the
// decision paths that made the maps most of the CPU time, and this table
// does a lookup in about half of it (docs/benchmarks.md). Keys are hashed
// with a per-table random seed: they come from clients, and keys that
// collided on purpose would turn lookups into scans.
//
// A Table is not safe for concurrent use.
package keytable
