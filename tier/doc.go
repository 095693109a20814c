// Package tier stores KV-cache blocks in a hierarchy of tiers: fast, small
// ones on top (DRAM, later GPU memory), large, slower ones below (SSD).
//
// A Tier is one level: it stores blocks by key within a byte capacity it never
// exceeds, evicts by a pluggable policy (package tier/policy) when it needs
// room, and never evicts a block that a reader holds or that is soft-pinned.
// Reads are zero-copy where the medium allows: Get returns a Handle whose
// bytes stay valid until Release. Writes are all-or-nothing: a block becomes
// visible only when completely written and checksummed.
//
// A Hierarchy composes tiers into the store users see:
//
//	h, err := tier.NewHierarchy([]tier.Tier{dramTier, ssdTier}, tier.HierarchyOptions{})
//	res, err := h.Put(ctx, key, value, tier.PutOptions{})  // res.Created is false for a duplicate
//	hd, err := h.Get(ctx, key)                             // from the fastest tier holding it
//	defer hd.Release()
//	m := h.PrefixMatch(chain)                              // leading blocks cached, per tier
//
// Puts land in the top tier with room. A block evicted from a tier is demoted
// to the next one through a bounded write-behind queue; a hit in a lower tier
// can promote the block back up. Implementations live in tier/dram and
// tier/ssd; tier/tiertest is the conformance suite every Tier passes.
//
// A put may give the block a retention class (PutOptions.Retention): the
// tiers that record classes (Retainer) evict low before normal before high
// and never a pinned block until Hierarchy.SetRetention releases it or its
// RetainUntil passes (docs/retention.md).
package tier
