// Package ssd is the SSD tier: blocks in append-only segment files, indexed
// in pebble.
//
// A put compresses the block (if the tier is configured to), reserves space at
// the end of the active segment, writes a self-describing record there with a
// positioned write, waits for an fdatasync that began after its write (puts
// in flight share one: group commit) and then records the block's location
// in pebble. Only then is it acknowledged. Every read checks the record header
// and the payload's CRC-32C after decompression; a block that fails is dropped
// and reported, never served.
//
// Space is reclaimed a segment at a time, least recently read first, as
// flash caches do (CacheLib's block cache, Kangaroo): dropping a whole file
// costs no write amplification. Soft-pinned blocks in a segment chosen for
// eviction are copied forward before it goes.
//
// After a crash, pebble holds the locations of acknowledged blocks except
// possibly the last few whose index write had not reached the OS; opening the
// tier rescans each segment past the point its index covers, re-indexes the
// intact records it finds and cuts off a torn tail. docs/durability.md states
// what each tier promises.
//
// A failing device degrades the tier instead of failing the node: it
// refuses puts, keeps serving the reads it can verify, says why in Health,
// and probes the device until it recovers (faults.go; docs/durability.md,
// "Faults"). The files go through Options.Files and the index through
// Options.IndexFS, so tests can fail them (tier/ssd/ssdtest).
//
// The tier can also keep values inside pebble itself (OpenPebble); the
// segment layout is the default because it writes each block once, where an
// LSM rewrites it on every compaction (docs/benchmarks.md has both).
package ssd
