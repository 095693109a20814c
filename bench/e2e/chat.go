package e2e

import (
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/yuebing/yuebing/bench"
)

// Prompt forms of a routed replay (RouterOptions.Prompts).
const (
	// PromptsIDs sends each request's prompt as token ids.
	PromptsIDs = "ids"
	// PromptsChat sends it as a chat: one message of text per block of
	// the trace's tokens (the same block, the same text), so requests that
	// share blocks share messages, and the router and the engines key them
	// through their tokenizer and chat template.
	PromptsChat = "chat"
)

// chatWords are what a block's text is made of: common words, each about
// one token with its leading space, so a block of the trace reads as
// about as many tokens as it had.
var chatWords = strings.Fields(`the of and to in is that for it as was with be by on not he this are or his from at which but
have an they you were her she there been one all we their has would when if so no will more can out up about who them
some what into than time only its other new could these two may first then do any like my now over such our man me even
most made after also did many before must through back years where much your way well down should because each just those
people how too little state good very make world still own see men work long get here between both life being under never
day same another know while last might us great old year off come since against go came right used take three cache block
engine token prompt router node memory layer model`)

// chatBodies renders each request of a sample as a chat completion body:
// a user message per full block of tokens and one for the rest, each the
// text chatWords make from a seed of its tokens.
func chatBodies(sample []e2eRequest, model string) [][]byte {
	texts := map[uint64]string{}
	out := make([][]byte, len(sample))
	for i, r := range sample {
		var msgs []map[string]string
		for b := 0; b < len(r.tokens); b += bench.TraceBlockTokens {
			blk := r.tokens[b:min(b+bench.TraceBlockTokens, len(r.tokens))]
			h := fnv.New64a()
			for _, t := range blk {
				h.Write([]byte{byte(t), byte(t >> 8), byte(t >> 16), byte(t >> 24)})
			}
			seed := h.Sum64()
			text, ok := texts[seed]
			if !ok {
				rng := rand.New(rand.NewPCG(seed, uint64(len(blk))))
				var sb strings.Builder
				for range len(blk) {
					sb.WriteString(chatWords[rng.IntN(len(chatWords))])
					sb.WriteByte(' ')
				}
				text = sb.String()
				texts[seed] = text
			}
			msgs = append(msgs, map[string]string{"role": "user", "content": text})
		}
		body, err := json.Marshal(map[string]any{"model": model, "max_tokens": r.output, "stream": true, "messages": msgs})
		if err != nil {
			panic("BUG: e2e: a chat does not marshal: " + err.Error())
		}
		out[i] = body
	}
	return out
}
