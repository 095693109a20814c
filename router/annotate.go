package router

import (
	"net/http"
	"strconv"
)

// Response headers naming the router's decision, so a client (or a
// benchmark) can set the prediction against what it observed.
const (
	// HeaderEngine is the engine that ran the request (the decode engine
	// of a disaggregated one).
	HeaderEngine = "X-Yuebing-Engine"
	// HeaderPredictedTTFT is Algorithm 1's TTFT estimate in seconds:
	// transfer, queue and prefill.
	HeaderPredictedTTFT = "X-Yuebing-Predicted-Ttft"
	// HeaderPrefixTokens is the prompt's prefix the decision counted as
	// cached on the engine, pulled included.
	HeaderPrefixTokens = "X-Yuebing-Prefix-Tokens"
)

// annotate sets the decision's headers, unless they are to be hidden
// (Caller.HideHits).
func annotate(h http.Header, engine string, p *Plan, hide bool) {
	if hide {
		return
	}
	h.Set(HeaderEngine, engine)
	h.Set(HeaderPredictedTTFT, strconv.FormatFloat(p.Decision.Estimates.TTFT.Seconds(), 'g', 6, 64))
	h.Set(HeaderPrefixTokens, strconv.Itoa(p.Decision.PrefixTokens))
}
