package router

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/yuebing/yuebing/adapter"
	"github.com/yuebing/yuebing/enginesim"
	"github.com/yuebing/yuebing/internal/openai"
)

// tokEngine starts a yuebing engine simulator's HTTP API tokenizing with
// encoding, and returns its base URL.
func tokEngine(t *testing.T, encoding string) string {
	t.Helper()
	e, err := enginesim.New(enginesim.Options{
		Layout:    adapter.Layout{Name: "test", Layers: 2, KVHeads: 1, HeadDim: 8, DTypeBytes: 2, BlockTokens: testBS, GroupLayers: 1},
		Namespace: testNS, Model: testModel, PoolBlocks: 8, Encoding: encoding, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// words are what generated prompts are made of: English, code, digits,
// accents, other scripts, runs of whitespace and lookalikes of the
// template's markers.
var words = []string{"the", "cache", "Hello,", "world!", "  ", "\n", "\t", "2024", "3.14159", "café", "naïve", "東京", "Привет",
	"func main() {", "}", "<|user|>", "<|endoftext|>", "😀", "--", "...", "don't", "I'm", "x=1;", "\r\n", "ünïcödé", "42"}

func genText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(3) > 0 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func genChat(rng *rand.Rand) []openai.Message {
	roles := []string{"user", "assistant"}
	msgs := []openai.Message{{Role: "system", Content: jsonString(genText(rng, 5+rng.IntN(30)))}}
	for i := range 1 + rng.IntN(5) {
		msgs = append(msgs, openai.Message{Role: roles[i%2], Content: jsonString(genText(rng, 1+rng.IntN(40)))})
	}
	return msgs
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// TestTokensMatchEngine: for 1,000 text prompts and chats, the router's
// ids, local or from the engine's /tokenize (cached or not), are the ids
// the engine simulator's /tokenize gives.
func TestTokensMatchEngine(t *testing.T) {
	url := tokEngine(t, "cl100k_base")
	local, err := NewTokenizer("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	remote, _ := NewTokenizer("cl100k_base")
	remote.remote = &remoteTokenizer{model: testModel, timeout: 5 * time.Second, client: defaultClient(), urls: []string{url},
		up: func(int) bool { return true }}
	remote.useEngine.Store(true)
	ask := remote.remote // the engine's own answer, uncached
	rng := rand.New(rand.NewPCG(24, 1))
	const n = 1000
	same := 0
	for i := range n {
		var want, gotLocal, gotRemote []uint32
		if i%2 == 0 {
			text := genText(rng, 1+rng.IntN(200))
			if want, err = ask.tokenize(tokenizeBody{Prompt: &text}); err != nil {
				t.Fatal(err)
			}
			gotLocal, gotRemote = local.Encode(text), remote.Encode(text)
		} else {
			msgs := genChat(rng)
			gen := true
			if want, err = ask.tokenize(tokenizeBody{Messages: msgs, AddGenerationPrompt: &gen}); err != nil {
				t.Fatal(err)
			}
			if gotLocal, err = local.EncodeChat(msgs, 1<<20); err != nil {
				t.Fatal(err)
			}
			if gotRemote, err = remote.EncodeChat(msgs, 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		if slices.Equal(gotLocal, want) && slices.Equal(gotRemote, want) {
			same++
		} else if n-same <= 3 {
			t.Errorf("prompt %d: local %v, remote %v, engine %v", i, gotLocal, gotRemote, want)
		}
	}
	if same != n {
		t.Fatalf("%d of %d prompts and chats keyed with the engine's ids, want all", same, n)
	}
}

// TestTokenizeAuto: a router in front of engines that tokenize as it does
// keeps its local tokenizer; in front of engines with another vocabulary
// it asks their /tokenize, and its ids are theirs; and when they stop
// answering it falls back to its own, counted.
func TestTokenizeAuto(t *testing.T) {
	text := "An engine's own ids, whatever its vocabulary: 東京 2024."
	for _, tc := range []struct {
		encoding, want string
	}{{"cl100k_base", TokenizeLocal}, {"o200k_base", TokenizeEngine}} {
		t.Run(tc.encoding, func(t *testing.T) {
			url := tokEngine(t, tc.encoding)
			r := startRouter(t, Options{Engines: []Engine{{ID: "e0", URL: url}}})
			deadline := time.Now().Add(5 * time.Second)
			for r.tok.Source() != tc.want && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := r.tok.Source(); got != tc.want {
				t.Fatalf("source %s, want %s", got, tc.want)
			}
			ask := &remoteTokenizer{model: testModel, timeout: 5 * time.Second, client: defaultClient(), urls: []string{url}, up: func(int) bool { return true }}
			want, err := ask.tokenize(tokenizeBody{Prompt: &text})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(map[string]any{"model": testModel, "prompt": text})
			p, err := r.Prepare(Completions, b)
			if err != nil || !slices.Equal(p.Prompt.Tokens, want) {
				t.Fatalf("prepared %v, %v; the engine's ids %v", p.Prompt.Tokens, err, want)
			}
			msgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":"` + text + `"}]`
			var wantChat []uint32
			gen := true
			var m []openai.Message
			json.Unmarshal([]byte(msgs), &m)
			if wantChat, err = ask.tokenize(tokenizeBody{Messages: m, AddGenerationPrompt: &gen}); err != nil {
				t.Fatal(err)
			}
			if p, err := r.Prepare(ChatCompletions, []byte(`{"messages":`+msgs+`}`)); err != nil || !slices.Equal(p.Prompt.Tokens, wantChat) {
				t.Fatalf("prepared chat %v, %v; the engine's ids %v", p.Prompt.Tokens, err, wantChat)
			}
			if tc.want == TokenizeEngine {
				// Asked again, the answer comes from the cache.
				r.Prepare(Completions, b)
				if c := counterValue(t, r.tok.m.requests.WithLabelValues("cache")); c < 1 {
					t.Errorf("cache answers %v, want 1 or more", c)
				}
			}
		})
	}
	t.Run("fallback", func(t *testing.T) {
		tok, _ := NewTokenizer("cl100k_base")
		tok.remote = &remoteTokenizer{model: testModel, timeout: time.Second, client: defaultClient(), urls: []string{"http://127.0.0.1:1"},
			up: func(int) bool { return true }}
		tok.useEngine.Store(true)
		if got := tok.Encode(text); !slices.Equal(got, tok.bpe.Encode(text)) {
			t.Fatalf("fallback ids %v", got)
		}
		if c := counterValue(t, tok.m.requests.WithLabelValues("fallback")); c != 1 {
			t.Fatalf("fallbacks counted %v, want 1", c)
		}
	})
}

// TestTokenizerChatCache: a conversation's earlier messages come from the
// cache, and the bound holds.
func TestTokenizerChatCache(t *testing.T) {
	r := startRouter(t, Options{Engines: []Engine{{ID: "e0", URL: newSimEngine(t).srv.URL}}, Tokenize: TokenizeLocal, TokenCacheTokens: 4096})
	rng := rand.New(rand.NewPCG(7, 7))
	msgs := genChat(rng)
	if _, err := r.tok.EncodeChat(msgs, 1<<20); err != nil {
		t.Fatal(err)
	}
	hits := counterValue(t, r.tok.m.cacheHit)
	msgs = append(msgs, openai.Message{Role: "user", Content: jsonString("one more")})
	if _, err := r.tok.EncodeChat(msgs, 1<<20); err != nil {
		t.Fatal(err)
	}
	// Every earlier message and the generation prompt hit; the new
	// message missed.
	if got := counterValue(t, r.tok.m.cacheHit) - hits; got != float64(len(msgs)) {
		t.Fatalf("%v hits of %d segments, want %d", got, len(msgs)+1, len(msgs))
	}
	for i := range 300 {
		r.tok.EncodeChat([]openai.Message{{Role: "user", Content: jsonString(fmt.Sprint(genText(rng, 30), i))}}, 1<<20)
	}
	if _, n := r.tok.chats.Len(); n > 4096 {
		t.Fatalf("the chat cache holds %d tokens, bound 4096", n)
	}
	if _, err := r.tok.EncodeChat(msgs, 10); err == nil {
		t.Fatal("a chat over the byte limit was tokenized")
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
