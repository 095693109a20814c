"""The Redis traffic of LMCache's RedisConnector, against a live server.

LMCache stores each KV chunk as two keys: "<k>kv_bytes" (the payload) and
"<k>metadata" (RemoteMetadata: length, a 4-dim shape, dtype and format as
seven little-endian int32). A put sets kv_bytes, then metadata; a lookup
checks EXISTS metadata; a get reads metadata, then kv_bytes; a client that
finds metadata without its payload deletes the metadata.

This script does exactly that with redis-py, with the sync client and with
redis.asyncio over one pool of many connections, and checks every reply.
Usage: lmcache_flow.py HOST PORT [CHUNKS] [PAYLOAD_BYTES]
"""

import asyncio
import os
import struct
import sys

import redis
import redis.asyncio as aredis

HOST, PORT = sys.argv[1], int(sys.argv[2])
CHUNKS = int(sys.argv[3]) if len(sys.argv) > 3 else 64
PAYLOAD = int(sys.argv[4]) if len(sys.argv) > 4 else 256 << 10
POOL = 150  # LMCache's RedisConnector max_connections


def chunk_key(prefix, i):
    # CacheEngineKey.to_string(): fmt@model@world_size@worker_id@chunk_hash
    return f"vllm@{prefix}/Llama-3.1-8B@1@0@{i:064x}"


def metadata(length, i):
    md = struct.pack("<7i", length, 2, 32, 256, 1024 + i % 7, 5, 1)
    assert len(md) == 28
    return md


def payload(i):
    return (bytes([i % 251]) * 64 + os.urandom(64)) * (PAYLOAD // 128)


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def sync_flow():
    r = redis.Redis(host=HOST, port=PORT, socket_timeout=30)
    if r.ping() is not True:
        fail("PING")
    stored = {}
    for i in range(CHUNKS):
        k, kv = chunk_key("sync", i), payload(i)
        if r.set(k + "kv_bytes", kv) is not True:
            fail("SET kv_bytes")
        if r.set(k + "metadata", metadata(len(kv), i)) is not True:
            fail("SET metadata")
        stored[k] = kv
    for i in range(CHUNKS):
        k = chunk_key("sync", i)
        if r.exists(k + "metadata") != 1:
            fail(f"EXISTS {k}metadata")
        md = r.get(k + "metadata")
        if md is None or len(md) != 28:
            fail(f"GET {k}metadata: {md!r}")
        length = struct.unpack("<7i", md)[0]
        kv = r.get(k + "kv_bytes")
        if kv is None or len(kv) != length or kv != stored[k]:
            fail(f"GET {k}kv_bytes: wrong payload")
    missing = chunk_key("sync", CHUNKS + 1)
    if r.exists(missing + "metadata") != 0 or r.get(missing + "metadata") is not None:
        fail("a missing chunk exists")
    for i in range(CHUNKS):
        k = chunk_key("sync", i)
        if r.delete(k + "metadata") != 1 or r.delete(k + "kv_bytes") != 1:
            fail(f"DEL {k}")
        if r.exists(k + "metadata", k + "kv_bytes") != 0:
            fail(f"{k} still exists after DEL")
    r.close()


async def async_flow():
    pool = aredis.ConnectionPool(host=HOST, port=PORT, max_connections=POOL)
    r = aredis.Redis(connection_pool=pool)
    sem = asyncio.Semaphore(POOL)
    stored = {}

    async def put(i):
        k, kv = chunk_key("async", i), payload(i)
        async with sem:
            # kv bytes first, as LMCache does, to avoid a race
            if await r.set(k + "kv_bytes", kv) is not True:
                fail("async SET kv_bytes")
            if await r.set(k + "metadata", metadata(len(kv), i)) is not True:
                fail("async SET metadata")
        stored[k] = kv

    async def get(i):
        k = chunk_key("async", i)
        async with sem:
            if not await r.exists(k + "metadata"):
                fail(f"async EXISTS {k}")
            md = await r.get(k + "metadata")
            if md is None:
                fail(f"async GET {k}metadata")
            length = struct.unpack("<7i", md)[0]
            kv = await r.get(k + "kv_bytes")
        if kv is None:
            async with sem:
                await r.delete(k + "metadata")
            fail(f"metadata without payload for {k}")
        if len(kv) != length or kv != stored[k]:
            fail(f"async GET {k}kv_bytes: wrong payload")

    async def contains(n):
        # batched_async_contains: EXISTS metadata chunk after chunk
        hits = 0
        for i in range(n):
            async with sem:
                if not await r.exists(chunk_key("async", i) + "metadata"):
                    break
            hits += 1
        return hits

    await asyncio.gather(*(put(i) for i in range(CHUNKS)))
    if await contains(CHUNKS + 5) != CHUNKS:
        fail("batched contains")
    await asyncio.gather(*(get(i) for i in range(CHUNKS)))
    await asyncio.gather(*(r.delete(chunk_key("async", i) + "metadata", chunk_key("async", i) + "kv_bytes") for i in range(CHUNKS)))
    if await contains(CHUNKS) != 0:
        fail("chunks remain after DEL")
    in_use = len(pool._in_use_connections) + len(pool._available_connections)
    await r.close()
    await pool.disconnect()
    return in_use


sync_flow()
conns = asyncio.run(async_flow())
print(f"ok chunks={CHUNKS} payload={PAYLOAD} async_connections={conns}")
