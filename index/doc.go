// Package index maps block keys to where the blocks live: which tiers hold a
// block, its location inside a tier, its size and checksum, its soft pin and
// when it was last used. Its one query that matters for scheduling is
// PrefixMatch: given a request's key chain, how many leading blocks are cached,
// and in which tier.
//
//	ix := index.New(index.Options{})
//	ix.Set(k, index.Entry{Tiers: index.TierMask(1), Size: 1 << 20})
//	m := ix.PrefixMatch(chain) // m.Len leading blocks present; m.PerTier[0] of them in tier 0
//
// Reads take no lock. Each shard is an open-addressing table guarded by a
// sequence lock: writers serialize on a mutex and bump the sequence around
// their change; readers load the sequence, read with atomic loads (plain moves
// on amd64 and arm64) and retry if the sequence moved. A prefix match of a
// 512-block chain therefore issues its memory loads back to back instead of
// behind 512 lock round trips, which is what keeps it within microseconds on a
// 10-million-entry index. See docs/index.md for the layout and measured costs.
package index
