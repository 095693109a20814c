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
// 10-million-entry index. See docs/architecture.md for the layout and
// docs/benchmarks.md for measured costs.
//
// Global is the cluster's directory, held by the elected leader: for every
// block, which nodes hold it and in which tiers, fed by the nodes' add/remove
// events and rebuilt from their full states when a leader starts. Its Query is
// PrefixMatch across the cluster: per node, the longest held prefix of a chain
// and its per-tier counts.
//
//	g := index.NewGlobal(index.GlobalOptions{})
//	g.ReplaceNode(4, []index.Held{{Key: k0, Tier: 0}, {Key: k1, Tier: 1}}) // node 4 (re)connects
//	g.Apply(7, []index.Change{{Key: k0, Tier: 0, Added: true}})            // node 7 stored k0
//	for _, m := range g.Query(chain) {
//		// m.Node holds chain[:m.PrefixLen]; m.PerTier[t] of those fastest in tier t
//	}
//
// docs/cluster.md describes its layout (per-node roaring bitmaps of interned
// block ids), how it was chosen, and its concurrency.
package index
