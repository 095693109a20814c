package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chatMsgs is a chat under a shared system prompt: a long instruction
// every conversation of one assistant starts with.
func chatMsgs(system string, question int) []map[string]string {
	return []map[string]string{
		{"role": "system", "content": system},
		{"role": "user", "content": fmt.Sprintf("Question %d: what does block %d of the cache hold, and why?", question, question*7)},
	}
}

// chat sends a chat completion through the router and returns the
// status, the engine the router chose and the prefix tokens its decision
// counted as cached.
func chat(t *testing.T, url string, msgs []map[string]string) (int, string, int) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "sim-70b", "messages": msgs, "max_tokens": 2})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Logf("router answered %d: %s", resp.StatusCode, raw)
	}
	prefix, _ := strconv.Atoi(resp.Header.Get("X-Yuebing-Prefix-Tokens"))
	return resp.StatusCode, resp.Header.Get("X-Yuebing-Engine"), prefix
}

// scheduledEngines lists the engines the router schedules now.
func scheduledEngines(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url + "/v1/conductor/instances")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Instances []struct {
			ID string `json:"id"`
		} `json:"instances"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	ids := map[string]bool{}
	for _, in := range out.Instances {
		ids[in.ID] = true
	}
	return ids
}

// TestRouterChatsEndToEnd runs a yuebing node alone, two engine-sim
// processes and the router in front of them, all real processes, with
// chats (text through the engines' tokenizer and chat template, not token
// ids): chats sharing a system prompt stick to the engine holding it, the
// router keys them with the engines' own ids (its local tokenizer, which
// their /tokenize agrees with), the pool node alone is queried without an
// error, and an engine killed and restarted gets no request for the
// blocks it lost.
func TestRouterChatsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs engine and node processes")
	}
	nd := serve(t, t.TempDir())
	e0, e1 := startEngineSim(t, "e0"), startEngineSim(t, "e1")
	url := startRouter(t, "--model", "sim-70b", "--block-size", "16", "--speculative-ttl", "100ms",
		"--engine", e0.flag, "--engine", e1.flag, "--pool", nd.url)
	waitFor(t, 30*time.Second, "both engines scheduled", func() string {
		if ids := scheduledEngines(t, url); !ids["e0"] || !ids["e1"] {
			return fmt.Sprintf("scheduled %v", ids)
		}
		return ""
	})

	system := strings.Repeat("You are the cache assistant of a large inference cluster. Answer briefly, cite blocks. ", 20)
	_, holder, _ := chat(t, url, chatMsgs(system, 0))
	if holder != "e0" && holder != "e1" {
		t.Fatalf("the first chat went to %q", holder)
	}
	const n = 20
	stuck := 0
	for i := 1; i <= n; i++ {
		time.Sleep(150 * time.Millisecond) // past the speculative TTL: only the engine's events count
		st, eng, prefix := chat(t, url, chatMsgs(system, i))
		if st == 200 && eng == holder && prefix > 0 {
			stuck++
		}
	}
	if stuck < n*95/100 {
		t.Fatalf("%d of %d chats sharing the system prompt went to %s, the engine holding it, with a cached prefix", stuck, n, holder)
	}
	if v := metric(t, url, `yuebing_router_tokenize_total{source="local"}`); v < n {
		t.Errorf("%v chats tokenized locally, want %d or more", v, n)
	}
	if v := metric(t, url, `yuebing_router_events_total{engine="`+holder+`",kind="stored"}`); v < 1 {
		t.Errorf("%v stored events from %s", v, holder)
	}
	if v := metric(t, url, "yuebing_router_pool_query_errors_total"); v != 0 {
		t.Errorf("%v failed pool queries on a node alone, want 0", v)
	}

	// The holder is killed and restarted empty on the same ports: the
	// router drops its view, and once it is back, the next chat is placed
	// with nothing cached anywhere (before, its old view drew the request
	// for blocks it no longer had).
	h := map[string]*simProc{"e0": e0, "e1": e1}[holder]
	h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.done
	waitFor(t, 30*time.Second, holder+" out of the scheduler", func() string {
		if scheduledEngines(t, url)[holder] {
			return "still scheduled"
		}
		return ""
	})
	restartSim(t, h)
	waitFor(t, 30*time.Second, holder+" back in the scheduler", func() string {
		if !scheduledEngines(t, url)[holder] {
			return "not scheduled"
		}
		return ""
	})
	st, eng, prefix := chat(t, url, chatMsgs(system, n+1))
	if st != 200 || prefix != 0 {
		t.Fatalf("after %s restarted: %d from %s with %d cached tokens, want 0 (no engine holds the prompt)", holder, st, eng, prefix)
	}
	time.Sleep(150 * time.Millisecond)
	if st, again, prefix := chat(t, url, chatMsgs(system, n+2)); st != 200 || again != eng || prefix == 0 {
		t.Fatalf("the next chat: %d from %s with %d cached tokens, want %s with its prefix", st, again, prefix, eng)
	}
}

// restartSim starts a killed engine-sim again on its old ports.
func restartSim(t *testing.T, s *simProc) {
	t.Helper()
	opts := map[string]string{}
	for _, kv := range strings.Split(s.flag, ",") {
		k, v, _ := strings.Cut(kv, "=")
		opts[k] = v
	}
	cmd := exec.Command(binary, "engine-sim", "--name", s.name, "--listen", strings.TrimPrefix(opts["url"], "http://"),
		"--kv-events", opts["events"], "--kv-replay", opts["replay"], "--block-tokens", "16",
		"--namespace", clusterNS, "--pool-blocks", "64", "--time-scale", "0.01")
	cmd.Env = envWithout("YUEBING_")
	nd, _ := start(t, "engine-sim "+s.name+" again", cmd, "ready")
	s.node = nd
}
