// Package s3 is the tier below SSD: blocks kept in an S3-compatible bucket,
// so a pool's capacity does not end at its nodes' disks, and a second
// cluster (or a node that lost its SSD) configured with the same bucket and
// namespace reads what the first wrote.
//
//	tr, err := s3.Open(ctx, s3.Options{
//		Endpoint: "127.0.0.1:7070", Bucket: "kv", Namespace: "prod",
//		AccessKeyID: id, SecretAccessKey: secret, Capacity: 1 << 40,
//	})
//	err = tr.Put(ctx, key, value, tier.PutOptions{}) // buffered, uploaded with its segment
//	h, err := tr.Get(ctx, key)                         // ranged GET, checksum verified
//	defer h.Release()
//
// Blocks are packed into segment objects of about Options.SegmentSize (one
// PUT per segment, not per block). Each object ends with a footer listing
// its blocks (key, offset, length, CRC-32C, pin, metadata, retention
// class) and tombstones for blocks of older segments that were deleted or
// evicted or changed class; eviction takes low blocks before normal before
// high and never a hard-pinned one (docs/retention.md); the index is
// rebuilt at Open from the footers, oldest segment first, so it survives
// restarts with nothing kept on local disk. A read is a ranged GET of the
// block's bytes, verified against its CRC-32C: a corrupt block is dropped
// and reported as tier.ErrCorrupt, never served. A segment whose live bytes
// fall below Options.CompactBelow is compacted: its live blocks are copied
// into the open segment and the object is deleted once they are uploaded.
//
// When the bucket fails (down, slow past Options.RequestTimeout, 5xx, 403)
// the tier marks itself degraded (Health), reads of uploaded blocks fail at
// once with tier.ErrUnavailable instead of waiting, puts are buffered up to
// Options.MaxPending and then dropped or made to wait (Options.WhenDegraded),
// and a probe brings the tier back when the bucket answers again. The tier
// is a cache: blocks buffered when the process stops with the bucket down
// are lost. See docs/durability.md.
//
// The client is minio-go: one module with few dependencies, a small API
// whose ranged GET and path-style addressing work with any S3-compatible
// server, and per-client retry settings (the tier turns retries off and
// handles failures itself). Tests run against a real server, versitygw,
// started by package s3test.
package s3
