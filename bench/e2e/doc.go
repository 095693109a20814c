// Package e2e is `yuebing bench e2e`: a sample of a trace replayed against
// engine simulators (package enginesim) and a real node, with no caching,
// with each engine's own prefix cache and with the yuebing pool through the
// adapter, reporting TTFT; RunRouter replays it through the conductor's
// router instead, comparing routings.
package e2e
