// Package frame is the YBF1 framed body of multi-put requests and multi-get
// answers (docs/api.md has a worked example), shared by the server and the
// Go client so the two ends cannot drift:
//
//	magic "YBF1", then frames back to back until the body ends.
//	frame header, 48 bytes, integers little-endian:
//	  0:32  key, 32 raw bytes
//	  32:36 flags u32: bit 0 crc32c is set, bit 1 block missing (answers),
//	        bit 2 parent key follows (puts), bits 8-15 tier the block
//	        came from (answers; 255: another node); others zero
//	  36:40 crc32c u32 of the data (when bit 0 is set)
//	  40:48 length u64 of the data
//	then, with bit 2, the 32 raw bytes of the chain parent's key,
//	then length bytes of data.
//
// A length-prefixed binary layout streams in both directions without
// buffering a whole block, and its decoder is a few bounds checks.
package frame
