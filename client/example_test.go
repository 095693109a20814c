package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/yuebing/yuebing/block"
	"github.com/yuebing/yuebing/client"
)

// An engine looks up how much of a prompt's prefix is cached, reads those
// blocks, stores the ones it computed, and pins the whole prefix for an
// hour as a context.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.Options{Token: "tenant-token-from-ops"})
	if err != nil {
		log.Fatal(err)
	}
	const ns = "acme/llama-3-70b"
	tokens := make([]uint32, 4*256) // the prompt's token ids
	keys, err := block.ChainKeys(ns, 256, tokens)
	if err != nil {
		log.Fatal(err)
	}
	m, err := c.Exists(ctx, ns, keys)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range keys[:m.PrefixLen] {
		kv, _, err := c.Get(ctx, k, client.GetOptions{Namespace: ns})
		if errors.Is(err, client.ErrNotFound) {
			break // evicted since: recompute from here
		}
		_ = kv // load into the engine's KV cache
	}
	for _, k := range keys[m.PrefixLen:] {
		kv := make([]byte, 1<<20) // the KV tensors the engine computed
		if _, err := c.Put(ctx, ns, k, kv); err != nil {
			log.Fatal(err)
		}
	}
	cx, err := c.CreateContext(ctx, client.ContextSpec{Namespace: ns, Keys: keys, TTL: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cx.ID, cx.Resident)
}
