package main

import (
	"github.com/yuebing/yuebing/bench"
	"github.com/yuebing/yuebing/server"
)

// parseSize reads a byte count as operators write it ("4GiB", "512MiB",
// "1048576"), as server.ByteSize does for the serve flags.
func parseSize(s string) (int64, error) {
	var n server.ByteSize
	err := n.UnmarshalText([]byte(s))
	return int64(n), err
}

// parseTokenCount reads a token count: a whole number with an optional
// decimal suffix K, M or G, or a fractional one ("1.5M").
var parseTokenCount = bench.ParseTokenCount
