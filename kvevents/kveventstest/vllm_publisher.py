#!/usr/bin/python3
"""A KV event publisher speaking vLLM's wire format, for tests.

It binds a PUB socket and a ROUTER replay socket the way vLLM's
ZmqEventPublisher does (multipart [topic, 8-byte big-endian seq, msgpack
batch]; replay requests [start seq] answered by [seq, payload] messages and
a [-1, b""] end marker) and publishes what it reads on stdin, one JSON
command a line:

  {"op": "batch", "events": [...], "drop": false}
      events are dicts as vLLM declares them, with "type" the tag; "drop"
      numbers and buffers the batch but does not send it, as a PUB socket
      past its high-water mark drops it.
  {"op": "garbage", "payload": "hex"}     numbers and sends a payload as it is
  {"op": "raw", "frames": ["hex", ...]}   sends frames as they are
  {"op": "sync"}                           prints "OK" once all is sent

--layout array encodes batches and events as msgspec's array_like structs
(tagged arrays), --layout map as its default (maps with a "type" tag).
--hash bytes sends block hashes as 32-byte strings, --hash int as integers.
It prints "READY <pub port> <replay port>" once bound.
"""
import argparse
import json
import os
import sys
import time
from collections import deque

import msgpack
import zmq

STORED = ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"]
REMOVED = ["block_hashes", "medium"]
FIELDS = {"BlockStored": STORED, "BlockRemoved": REMOVED, "AllBlocksCleared": []}


def conv_hash(h, mode):
    if h is None or mode == "int":
        return h
    return int(h).to_bytes(32, "big", signed=True)


def encode(events, layout, mode, dp_rank):
    out = []
    for ev in events:
        ev = dict(ev)
        tag = ev.pop("type")
        if "block_hashes" in ev:
            ev["block_hashes"] = [conv_hash(h, mode) for h in ev["block_hashes"]]
        if "parent_block_hash" in ev:
            ev["parent_block_hash"] = conv_hash(ev["parent_block_hash"], mode)
        if layout == "array":
            out.append([tag] + [ev.get(f) for f in FIELDS[tag]])
        else:
            m = {"type": tag}
            for f in FIELDS[tag]:
                m[f] = ev.get(f)
            out.append(m)
    ts = time.time()
    if layout == "array":
        return msgpack.packb([ts, out, dp_rank], use_bin_type=True)
    return msgpack.packb({"ts": ts, "events": out, "data_parallel_rank": dp_rank}, use_bin_type=True)


def run(cmd, pub, topic, buf, seq, a):
    op = cmd["op"]
    if op == "batch":
        payload = encode(cmd["events"], a.layout, a.hash, 0)
        if not cmd.get("drop"):
            pub.send_multipart([topic, seq.to_bytes(8, "big"), payload])
        buf.append((seq, payload))
        seq += 1
    elif op == "garbage":
        payload = bytes.fromhex(cmd["payload"])
        pub.send_multipart([topic, seq.to_bytes(8, "big"), payload])
        buf.append((seq, payload))
        seq += 1
    elif op == "raw":
        pub.send_multipart([bytes.fromhex(f) for f in cmd["frames"]])
    elif op == "sync":
        print("OK", flush=True)
    return seq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pub-port", type=int, default=0)
    ap.add_argument("--replay-port", type=int, default=0)
    ap.add_argument("--no-replay", action="store_true")
    ap.add_argument("--topic", default="")
    ap.add_argument("--layout", choices=["array", "map"], default="array")
    ap.add_argument("--hash", choices=["int", "bytes"], default="bytes")
    ap.add_argument("--buffer", type=int, default=10000)
    # vLLM connects its PUB socket when the endpoint names a host (no "*").
    ap.add_argument("--connect", default="")
    a = ap.parse_args()

    fd = sys.stdin.fileno()
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.set_hwm(100000)
    if a.connect:
        pub.connect(a.connect)
        pub_port = int(a.connect.rsplit(":", 1)[1])
    elif a.pub_port:
        pub.bind("tcp://127.0.0.1:%d" % a.pub_port)
        pub_port = a.pub_port
    else:
        pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    replay = None
    replay_port = 0
    if not a.no_replay:
        replay = ctx.socket(zmq.ROUTER)
        if a.replay_port:
            replay.bind("tcp://127.0.0.1:%d" % a.replay_port)
            replay_port = a.replay_port
        else:
            replay_port = replay.bind_to_random_port("tcp://127.0.0.1")
    print("READY %d %d" % (pub_port, replay_port), flush=True)

    topic = a.topic.encode()
    buf = deque(maxlen=a.buffer)
    seq = 0
    poller = zmq.Poller()
    poller.register(fd, zmq.POLLIN)
    if replay is not None:
        poller.register(replay, zmq.POLLIN)
    pending = b""
    while True:
        ready = dict(poller.poll())
        if replay is not None and ready.get(replay):
            frames = replay.recv_multipart()
            if len(frames) == 3:
                ident, _, start = frames
                start = int.from_bytes(start, "big")
                for s, payload in buf:
                    if s >= start:
                        replay.send_multipart([ident, b"", s.to_bytes(8, "big"), payload])
                replay.send_multipart([ident, b"", (-1).to_bytes(8, "big", signed=True), b""])
        if ready.get(fd):
            data = os.read(fd, 1 << 16)
            if not data:
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                seq = run(json.loads(line), pub, topic, buf, seq, a)
    pub.close(linger=0)
    if replay is not None:
        replay.close(linger=0)


if __name__ == "__main__":
    main()
