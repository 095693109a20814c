// Package kvevents follows inference engines' KV cache through the events
// vLLM publishes, and turns them into yuebing's chained block keys.
//
// A vLLM engine started with KV events enabled publishes one multipart ZMQ
// message per batch on a PUB socket: [topic, 8-byte big-endian sequence
// number, msgpack payload]. The payload is an event batch, [ts, [events...],
// data_parallel_rank], whose events are tagged BlockStored, BlockRemoved or
// AllBlocksCleared records. A ROUTER socket beside it replays buffered
// batches from a requested sequence number, so a subscriber that sees a
// gap can recover what it missed.
//
// Engines name blocks by their own hashes, which mean nothing to the rest
// of the system. A Mapper keys each stored block the yuebing way, by
// chaining SHA-256 from its parent's key over the event's token ids, so an
// engine's HBM and the pool share one prefix index. A Subscriber runs one
// engine's stream: it connects, detects gaps and restarts, replays, decodes,
// maps and hands each change to a Sink.
//
//	sub, err := kvevents.NewSubscriber(kvevents.Options{
//		Engine:    "engine-0",
//		Endpoint:  "tcp://10.0.0.5:5557",
//		Replay:    "tcp://10.0.0.5:5558",
//		Namespace: "acme/llama-3-8b",
//		BlockSize: 16,
//		Sink:      state,
//	})
//	if err != nil { ... }
//	go sub.Run(ctx)
package kvevents
