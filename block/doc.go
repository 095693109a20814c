// Package block names and frames KV-cache blocks.
//
// A block is the KV tensors of a fixed number of consecutive prompt tokens
// (the block size, 16 to 1024 tokens). Its [Key] is a chained prefix hash: the
// key of block i covers its own tokens and, through the key of block i-1, every
// token before it. Two requests that share a prefix therefore share the keys of
// the blocks in that prefix, and equal keys mean reusable KV.
//
// Keys are scoped by a namespace, "tenant/model" optionally followed by
// "#salt", so identical tokens of two tenants never produce the same key:
//
//	keys, err := block.ChainKeys("acme/llama-3-70b", 256, tokens)
//
// Clients that bring their own identifiers (LMCache strings, an engine's own
// hashes) use [OpaqueKey], which hashes the namespace and the raw bytes.
//
// The package also defines the on-media block [Header] (length, codec and a
// CRC-32C of the payload) that every tier writes in front of a block and
// verifies on every read.
//
// The exact key derivation is specified in docs/keys.md; testdata/vectors.json
// holds test vectors for clients in other languages.
package block
