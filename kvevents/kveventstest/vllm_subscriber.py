#!/usr/bin/python3
"""Reads KV event batches the way vLLM's example subscriber does, for tests.

It subscribes to --pub, receives messages until one carries events, then asks --replay
for everything from sequence 0 (vLLM's replay protocol) until the end
marker, over a DEALER socket that frames the request as a REQ would (a REQ
reads only the first of the many replies), and prints one JSON line per message:
{"via": "pub"|"replay", "topic", "seq", "batch"}, the batch decoded with
msgpack (bytes as hex); live batches without events are not printed.
"""
import argparse
import json

import msgpack
import zmq


def plain(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in v.items()}
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pub", required=True)
    ap.add_argument("--replay", required=True)
    a = ap.parse_args()
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(a.pub)
    print("SUBSCRIBED", flush=True)
    while True:
        topic, seq, payload = sub.recv_multipart()
        batch = msgpack.unpackb(payload, raw=False)
        if batch[1]:
            print(json.dumps({"via": "pub", "topic": topic.decode(), "seq": int.from_bytes(seq, "big"),
                              "batch": plain(batch)}), flush=True)
            break
    req = ctx.socket(zmq.DEALER)
    req.connect(a.replay)
    req.send_multipart([b"", (0).to_bytes(8, "big")])
    poller = zmq.Poller()
    poller.register(req, zmq.POLLIN)
    while poller.poll(5000):
        _, seq, payload = req.recv_multipart()
        seq = int.from_bytes(seq, "big", signed=True)
        if seq == -1:
            print(json.dumps({"via": "end"}), flush=True)
            break
        print(json.dumps({"via": "replay", "seq": seq, "batch": plain(msgpack.unpackb(payload, raw=False))}), flush=True)
    sub.close(linger=0)
    req.close(linger=0)


if __name__ == "__main__":
    main()
