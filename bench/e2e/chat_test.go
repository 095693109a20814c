package e2e

import (
	"encoding/json"
	"testing"

	"github.com/yuebing/yuebing/bench"
)

// TestChatBodies: requests that share the trace's leading blocks share
// their leading messages word for word, and differ after.
func TestChatBodies(t *testing.T) {
	bt := bench.TraceBlockTokens
	tok := func(seed uint32, n int) []uint32 {
		ts := make([]uint32, n)
		for i := range ts {
			ts[i] = seed*100003 + uint32(i)
		}
		return ts
	}
	shared := tok(1, 2*bt)
	a := append(append([]uint32{}, shared...), tok(2, bt+10)...)
	b := append(append([]uint32{}, shared...), tok(3, bt)...)
	bodies := chatBodies([]e2eRequest{{tokens: a, output: 4}, {tokens: b, output: 4}}, "m")
	var reqs [2]struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	for i := range bodies {
		if err := json.Unmarshal(bodies[i], &reqs[i]); err != nil || reqs[i].Model != "m" || !reqs[i].Stream {
			t.Fatalf("body %d: %v %+v", i, err, reqs[i])
		}
	}
	ma, mb := reqs[0].Messages, reqs[1].Messages
	if len(ma) != 4 || len(mb) != 3 {
		t.Fatalf("%d and %d messages, want 4 (3 blocks and the rest) and 3", len(ma), len(mb))
	}
	if ma[0] != mb[0] || ma[1] != mb[1] || ma[2] == mb[2] {
		t.Fatal("shared blocks do not read as shared messages, or private ones do")
	}
}
