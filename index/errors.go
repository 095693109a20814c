package index

import "errors"

var (
	// ErrNodeRange reports a node id at or above GlobalOptions.MaxNodes.
	ErrNodeRange = errors.New("index: node id out of range")
	// ErrTierRange reports a tier at or above MaxTiers.
	ErrTierRange = errors.New("index: tier out of range")
)
