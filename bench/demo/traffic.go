package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/yuebing/yuebing/router"
)

// systemPrompt is what the demo's chats share: a prefix of several blocks
// that the first chat computes and the others find cached.
const systemPrompt = `You are the assistant of the yuebing demo. yuebing keeps the attention KV cache of prompt prefixes ` +
	`in a tiered DRAM and SSD block store, so that inference engines load what an earlier request computed instead ` +
	`of computing it again. A router in front of the engines sends each request to the engine where its prefix is ` +
	`cached, or where it is cheapest to pull it, following the engines' KV events. Answer briefly and precisely.`

// questions follow the shared prompt, one per chat.
var questions = []string{
	"What is a KV cache?",
	"Why do requests that share a prefix come out faster?",
	"What does the router decide?",
	"Where do the blocks an engine evicts go?",
	"How does the console count a hit?",
}

// Chat is one chat the traffic sent, as the client saw it.
type Chat struct {
	// Engine is the engine the router chose (X-Yuebing-Engine).
	Engine string
	// PrefixTokens is the prefix the router counted as cached on it
	// (X-Yuebing-Prefix-Tokens), in the router's tokens.
	PrefixTokens int
	// LocalHit, PoolHit and Computed are the engine's report of the
	// prompt's tokens: in its own cache, loaded from the node, computed.
	LocalHit, PoolHit, Computed int
	// Latency is from sending the request to the whole answer.
	Latency time.Duration
}

func (c Chat) String() string {
	return fmt.Sprintf("engine %s · router prefix %d tokens · engine KV: %d local, %d from the node, %d computed · %.2f s",
		c.Engine, c.PrefixTokens, c.LocalHit, c.PoolHit, c.Computed, c.Latency.Seconds())
}

// traffic sends the chats one after another: the first computes the
// shared prefix, and its engine saves the blocks in the node; the next two
// go where the prefix is cached. Then the engine that served them is taken
// out of the router, as an operator draining it would (DELETE
// /v1/conductor/instances/ID), and the last chats go to another engine,
// which loads the prefix from the node instead of computing it; the engine
// is registered again at the end. With one engine there is none to drain.
func (s *system) traffic(ctx context.Context, w io.Writer) error {
	fmt.Fprintf(w, "traffic: %d chats sharing a %d-byte system prompt\n", len(questions), len(systemPrompt))
	before, err := s.stats(ctx)
	if err != nil {
		return err
	}
	var last Chat
	send := func(i int) error {
		c, err := s.chat(ctx, questions[i])
		if err != nil {
			return fmt.Errorf("demo: chat %d: %w", i+1, err)
		}
		fmt.Fprintf(w, "  chat %d: %s\n", i+1, c)
		last = c
		return nil
	}
	if err := send(0); err != nil {
		return err
	}
	// The engine saves the prompt's blocks in the background: give them
	// a moment to land before a chat that could load them.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		st, err := s.stats(ctx)
		if err != nil {
			return err
		}
		if st.Store.Blocks > before.Store.Blocks {
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	const drainAt = 3
	for i := 1; i < drainAt; i++ {
		if err := send(i); err != nil {
			return err
		}
	}
	if len(s.engines) > 1 && last.Engine != "" {
		in, err := s.drain(ctx, last.Engine)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s taken out of the router; the next chats go to an engine without the prefix\n", last.Engine)
		for i := drainAt; i < len(questions) && err == nil; i++ {
			err = send(i)
		}
		if rerr := s.undrain(ctx, in); rerr != nil {
			return errors.Join(err, rerr)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s back in the router\n", in.ID)
	} else {
		for i := drainAt; i < len(questions); i++ {
			if err := send(i); err != nil {
				return err
			}
		}
	}
	st, err := s.stats(ctx)
	if err != nil {
		return err
	}
	h, m := st.Store.Hits, st.Store.Misses
	rate := "-"
	if h+m > 0 {
		rate = strconv.FormatFloat(100*float64(h)/float64(h+m), 'f', 1, 64) + "%"
	}
	fmt.Fprintf(w, "node: %d blocks, %d hits, %d misses (hit rate %s); see %s/ui/\n", st.Store.Blocks, h, m, rate, s.base)
	return nil
}

// instance is an engine's registration with the router's scheduler, as
// GET /v1/conductor/instances/ID gives it.
type instance struct {
	ID       string `json:"id"`
	Addr     string `json:"addr,omitempty"`
	Role     string `json:"role"`
	Capacity int64  `json:"capacity,omitempty"`
}

// drain takes engine id out of the router and returns its registration.
func (s *system) drain(ctx context.Context, id string) (instance, error) {
	var in instance
	url := s.base + "/v1/conductor/instances/" + id
	for _, step := range []struct {
		method string
		read   func(*http.Response) error
	}{
		{http.MethodGet, func(resp *http.Response) error { return json.NewDecoder(resp.Body).Decode(&in) }},
		{http.MethodDelete, nil},
	} {
		if err := s.do(ctx, step.method, url, "", step.read); err != nil {
			return in, fmt.Errorf("demo: taking %s out of the router: %w", id, err)
		}
	}
	return in, nil
}

// undrain registers in with the router again.
func (s *system) undrain(ctx context.Context, in instance) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	// The demo's own context may have ended (Ctrl-C during the traffic):
	// the engine goes back regardless.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.do(ctx, http.MethodPost, s.base+"/v1/conductor/instances", string(body), nil); err != nil {
		return fmt.Errorf("demo: registering %s again: %w", in.ID, err)
	}
	return nil
}

// chat sends one chat through the router.
func (s *system) chat(ctx context.Context, question string) (Chat, error) {
	body, err := json.Marshal(map[string]any{
		"model": s.layout.Name,
		"messages": []map[string]string{
			{"role": "system", "content": systemPrompt},
			{"role": "user", "content": question},
		},
		"max_tokens": 8,
	})
	if err != nil {
		return Chat{}, err
	}
	var c Chat
	t0 := time.Now()
	err = s.post(ctx, s.base+"/v1/chat/completions", string(body), func(resp *http.Response) error {
		var r struct {
			Yuebing struct {
				LocalHitTokens int `json:"local_hit_tokens"`
				PoolHitTokens  int `json:"pool_hit_tokens"`
				ComputedTokens int `json:"computed_tokens"`
			} `json:"yuebing"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		c.Engine = resp.Header.Get(router.HeaderEngine)
		c.PrefixTokens, _ = strconv.Atoi(resp.Header.Get(router.HeaderPrefixTokens))
		c.LocalHit, c.PoolHit, c.Computed = r.Yuebing.LocalHitTokens, r.Yuebing.PoolHitTokens, r.Yuebing.ComputedTokens
		return nil
	})
	c.Latency = time.Since(t0)
	return c, err
}

// nodeStats is the part of the node's GET /v1/stats the demo reads.
type nodeStats struct {
	Store struct {
		Blocks int64 `json:"blocks"`
		Hits   int64 `json:"hits"`
		Misses int64 `json:"misses"`
	} `json:"store"`
}

func (s *system) stats(ctx context.Context) (nodeStats, error) {
	var st nodeStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/v1/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("demo: node stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("demo: node stats: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("demo: node stats: %w", err)
	}
	return st, nil
}
