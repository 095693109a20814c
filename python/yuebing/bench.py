"""Measures the zero-copy calls against a raw Python socket.

    python3 -m yuebing.bench --url http://127.0.0.1:8080 [--json] [--quick]

For each value size (64 KiB, 1 MiB, 4 MiB by default) it times
MooncakeDistributedStore.get_into, batch_get_into (the same bytes as four
values of a quarter of the size) and put_from over shared memory (path
"shm": buffers registered by address, moved through the staging segment;
path "registered": memory from MooncakeHostMemAllocator, which the node maps
and writes itself) and over the socket, and, as the baselines of the same
run (taking turns with them, best round of each), ctypes.memmove of the same
bytes between two buffers (rows' ``vs_memcpy``) and a raw Python client that
moves the same bytes to and from a loopback server process with
``socket.recv_into`` / ``sendall`` (one request header, then the bytes; no
HTTP, no store). At 1 MiB and 4 MiB, rows batch_get_into_x16 and
batch_put_from_x16 time calls of 16 values of the size each (--batch), as
the vLLM and LMCache connectors load and save a prefix's blocks; their
memcpy is 16 memmoves from 16 separate buffers, their raw socket 16
transfers, and their gbps counts all 16 values. Rows carry gbps, baseline, baseline_gbps and ratio; shm rows
also ``vs_socket_path``, their figure over the socket path's. A table, or
with --json one JSON object {"results": [...]} on stdout; progress on stderr.

A put writes a new key each call; the keys a round stored are removed,
untimed, before the next round, so puts land in node memory written before
(a full node's case). --fresh-arena keeps them: each put then lands in
memory the node has not written since it started.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing
import socket
import struct
import sys
import time

from .mooncake import MooncakeDistributedStore, MooncakeHostMemAllocator

_REQ = struct.Struct("<cQ")  # op (G or P), length
# Values per batch_get_into call: its rows move the same bytes as a
# get_into of the size, in BATCH values.
BATCH = 4
# Values per call of the connector-shaped batch rows (batch_get_into_xN,
# batch_put_from_xN): vLLM's and LMCache's Mooncake connectors load or save
# all the blocks of a request's prefix in one call, tens of blocks of a
# few MiB each; 16 is a 4k-token prefix at 256 tokens a block.
BATCH_N = 16
# Value sizes the connector-shaped rows run at (when in --sizes).
BATCH_SIZES = (1 << 20, 4 << 20)


def _raw_server(ln: socket.socket, biggest: int) -> None:
    """The baseline's server: answers G n with n bytes, and reads the n
    bytes of P n, then acknowledges with one byte."""
    data = bytearray(biggest)
    mv = memoryview(data)
    while True:
        conn, _ = ln.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            hdr = bytearray(_REQ.size)
            while True:
                got = 0
                while got < len(hdr):
                    k = conn.recv_into(memoryview(hdr)[got:])
                    if not k:
                        break
                    got += k
                if got < len(hdr):
                    break
                op, n = _REQ.unpack(hdr)
                if op == b"G":
                    conn.sendall(mv[:n])
                else:
                    got = 0
                    while got < n:
                        got += conn.recv_into(mv[got:n], n - got)
                    conn.sendall(b"k")


class _RawClient:
    def __init__(self, addr):
        self.s = socket.create_connection(addr)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ack = bytearray(1)

    def get(self, mv: memoryview) -> None:
        self.s.sendall(_REQ.pack(b"G", len(mv)))
        got, n = 0, len(mv)
        while got < n:
            got += self.s.recv_into(mv[got:], n - got)

    def put(self, mv: memoryview) -> None:
        self.s.sendall(_REQ.pack(b"P", len(mv)))
        self.s.sendall(mv)
        self.s.recv_into(self.ack, 1)


def _fmt_size(n: int) -> str:
    return f"{n >> 20}MiB" if n >= 1 << 20 else f"{n >> 10}KiB"


def _race(contenders: dict, iters: int, rounds: int, between=None) -> dict:
    """Seconds per call of each contender: rounds of iters calls each,
    the contenders taking turns within a round so that all of them meet
    the same load on a shared machine; the best round of each counts.
    between, if given, runs untimed after the warm-up and after each
    contender's round."""
    best = {name: float("inf") for name in contenders}
    for fn in contenders.values():
        fn()  # warm-up: connections, first-touch of buffers
    if between:
        between()
    for _ in range(rounds):
        for name, fn in contenders.items():
            t = time.perf_counter()
            for _ in range(iters):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t) / iters)
            if between:
                between()
    return best


def run(url: str, sizes: list[int], budget: int, rounds: int = 5, progress=sys.stderr,
        fresh_arena: bool = False, batch_n: int = BATCH_N, batch_sizes=BATCH_SIZES) -> list[dict]:
    biggest = max(sizes)
    nbatch = [x for x in sizes if x in batch_sizes] if batch_n > 0 else []
    # Bytes of each path's source and destination of a connector-shaped
    # batch: batch_n values of the largest such size, side by side.
    span = batch_n * max(nbatch) if nbatch else 0
    ln = socket.create_server(("127.0.0.1", 0))
    srv = multiprocessing.get_context("fork").Process(target=_raw_server, args=(ln, biggest), daemon=True)
    srv.start()
    raw = _RawClient(ln.getsockname())
    stores = {}
    for path, shm in (("shm", True), ("socket", False)):
        s = MooncakeDistributedStore()
        rc = s.setup({"local_hostname": "bench", "master_server_address": url, "namespace": "bench/python",
                      "local_buffer_size": max(64 << 20, 2 * biggest), "shm": shm})
        if rc != 0:
            if shm:
                print(f"bench: no shared memory with {url} (setup {rc}); socket path only", file=progress)
                continue
            raise SystemExit(f"bench: cannot reach {url}: setup returned {rc}")
        stores[path] = s
    src = (ctypes.c_ubyte * biggest)()
    dst = (ctypes.c_ubyte * biggest)()
    ps, pd = ctypes.addressof(src), ctypes.addressof(dst)
    ctypes.memmove(ps, bytes(range(256)) * (biggest // 256), biggest)
    for s in stores.values():
        s.register_buffer(ps, biggest)
        s.register_buffer(pd, biggest)
    # path -> (store, source, destination)
    paths = {path: (s, ps, pd) for path, s in stores.items()}
    # path -> (source, destination) of span bytes each, for the
    # connector-shaped batches; the memcpy baseline's batch_n sources are
    # separate buffers (a connector's blocks are not one hot range).
    spans, nsrcs = {}, []
    if span:
        bsrc, bdst = (ctypes.c_ubyte * span)(), (ctypes.c_ubyte * span)()
        bps, bpd = ctypes.addressof(bsrc), ctypes.addressof(bdst)
        ctypes.memmove(bps, bytes(range(251)) * (span // 251) + bytes(span % 251), span)
        for s in stores.values():
            s.register_buffer(bps, span)
            s.register_buffer(bpd, span)
        spans = {path: (bps, bpd) for path in stores}
        nsrcs = [(ctypes.c_ubyte * max(nbatch))() for _ in range(batch_n)]
        for b in nsrcs:
            ctypes.memmove(ctypes.addressof(b), bps, len(b))
    allocator = MooncakeHostMemAllocator()
    held = []
    if "shm" in stores:
        rs, rd = allocator.alloc(biggest), allocator.alloc(biggest)
        held = [x for x in (rs, rd) if x]
        if rs and rd:
            ctypes.memmove(rs, ps, biggest)
            stores["shm"].register_buffer(rs, biggest)
            stores["shm"].register_buffer(rd, biggest)
            paths["registered"] = (stores["shm"], rs, rd)
        if span:
            brs, brd = allocator.alloc(span), allocator.alloc(span)
            held += [x for x in (brs, brd) if x]
            if brs and brd:
                ctypes.memmove(brs, spans["shm"][0], span)
                stores["shm"].register_buffer(brs, span)
                stores["shm"].register_buffer(brd, span)
                spans["registered"] = (brs, brd)
    rows = []
    try:
        for size in sizes:
            iters = max(4, min(500, budget // size))
            msrc = memoryview(src).cast("B")[:size]
            mdst = memoryview(dst).cast("B")[:size]
            print(f"bench: {_fmt_size(size)}: {rounds} rounds of {iters} calls per contender", file=progress)
            copy = lambda: ctypes.memmove(pd, ps, size)  # noqa: E731
            gets = {"raw": lambda: raw.get(mdst), "memcpy": copy}
            batches = {"raw": lambda: raw.get(mdst), "memcpy": copy}
            puts = {"raw": lambda: raw.put(msrc), "memcpy": copy}
            seq = iter(range(1 << 62))
            for path, (s, src_p, dst_p) in paths.items():
                key = f"get-{path}-{size}"
                if s.put_from(key, src_p, size) != 0:
                    raise SystemExit("bench: put_from failed")

                def get(s=s, key=key, dst_p=dst_p):
                    n = s.get_into(key, dst_p, size)
                    if n != size:
                        raise SystemExit(f"bench: get_into returned {n}")

                def put(s=s, path=path, src_p=src_p):
                    # A new key each time: a put of a stored key is not rewritten.
                    rc = s.put_from(f"put-{path}-{size}-{next(seq)}", src_p, size)
                    if rc != 0:
                        raise SystemExit(f"bench: put_from returned {rc}")

                # batch_get_into: the same bytes as BATCH values of a
                # BATCH-th of the size each, into consecutive ranges.
                part = size // BATCH
                bkeys = [f"batch-{path}-{size}-{i}" for i in range(BATCH)]
                for i, k in enumerate(bkeys):
                    if s.put_from(k, src_p + i * part, part) != 0:
                        raise SystemExit("bench: put_from failed")

                def batch(s=s, bkeys=bkeys, dst_p=dst_p, part=part):
                    got = s.batch_get_into(bkeys, [dst_p + i * part for i in range(BATCH)], [part] * BATCH)
                    if got != [part] * BATCH:
                        raise SystemExit(f"bench: batch_get_into returned {got}")

                gets[path], puts[path], batches[path] = get, put, batch
            results = {"get_into": _race(gets, iters, rounds)}
            for _, src_p, dst_p in paths.values():
                if ctypes.string_at(dst_p, size) != ctypes.string_at(src_p, size):
                    raise SystemExit("bench: get_into read back other bytes")
            results["batch_get_into"] = _race(batches, iters, rounds)
            for _, src_p, dst_p in paths.values():
                if ctypes.string_at(dst_p, size) != ctypes.string_at(src_p, size):
                    raise SystemExit("bench: batch_get_into read back other bytes")
            # A put writes a new key each call. Unless fresh_arena, the keys
            # a round stored are removed before the next, so puts land in
            # arena pages the node has written before, as on a full node
            # where a put takes an evicted block's room; the raw server
            # reads into one warm buffer too. Pages not written since the
            # node started cost a first write each (page faults, and on
            # some VMs the host's first touch), which would swamp the path
            # being measured: docs/benchmarks.md#python-client.
            recycle = None if fresh_arena else (lambda: [s.remove_by_regex("^put-") for s in stores.values()])
            results["put_from"] = _race(puts, iters, rounds, recycle)
            if size in nbatch:
                results.update(_batches(paths, spans, nsrcs, raw, mdst, msrc, size, batch_n, budget, rounds,
                                        recycle, seq, progress))
            for s in stores.values():
                s.remove_all()  # keeps the node's memory for the next size
            for op, t in results.items():
                for path in paths:
                    if path not in t:
                        continue
                    # A connector-shaped batch moves batch_n values a call.
                    per = size * (batch_n if op.endswith(f"_x{batch_n}") else 1)
                    gbps = per / t[path] / 1e9
                    row = {"name": f"{op}/{_fmt_size(size)}/{path}", "op": op, "size": size, "path": path,
                           "calls": t.get("calls", iters) * rounds, "us_per_call": round(t[path] * 1e6, 1),
                           "gbps": round(gbps, 3),
                           "baseline": "raw socket " + ("sendall" if op.startswith(("put", "batch_put")) else "recv_into"),
                           "baseline_gbps": round(per / t["raw"] / 1e9, 3), "ratio": round(t["raw"] / t[path], 3)}
                    row["vs_memcpy"] = round(t["memcpy"] / t[path], 3)
                    if path != "socket" and "socket" in stores:
                        row["vs_socket_path"] = round(t["socket"] / t[path], 3)
                    rows.append(row)
    finally:
        for p in held:
            allocator.free(p)
        for s in stores.values():
            s.close()
        raw.s.close()
        srv.kill()
        srv.join()
        ln.close()
    return rows


def _batches(paths, spans, nsrcs, raw, mdst, msrc, size, n, budget, rounds, recycle, seq, progress) -> dict:
    """The connector-shaped rows at one value size: batch_get_into and
    batch_put_from of n values of size bytes each, at consecutive ranges of
    a path's span (batch_get_into_xN, batch_put_from_xN). Their memcpy
    baseline is what the caller would pay to move the same values itself:
    n memmoves of size bytes, each from a buffer of its own (not one large
    copy of one hot range), into the same destination ranges as the
    registered path's; the raw socket moves the n values one by one."""
    iters = max(4, min(500, budget // (n * size)))
    print(f"bench: {_fmt_size(size)} x{n}: {rounds} rounds of {iters} batch calls per contender", file=progress)
    dsts = [spans.get("registered", spans["shm"] if "shm" in spans else next(iter(spans.values())))[1] + i * size
            for i in range(n)]
    srcs = [ctypes.addressof(b) for b in nsrcs]

    def copies():
        for sp, dp in zip(srcs, dsts):
            ctypes.memmove(dp, sp, size)

    def raw_gets():
        for _ in range(n):
            raw.get(mdst)

    def raw_puts():
        for _ in range(n):
            raw.put(msrc)

    gets = {"raw": raw_gets, "memcpy": copies}
    puts = {"raw": raw_puts, "memcpy": copies}
    sizes = [size] * n
    for path, (s, _, _) in paths.items():
        if path not in spans:
            continue
        src_p, dst_p = spans[path]
        keys = [f"batchn-{path}-{size}-{i}" for i in range(n)]
        if s.batch_put_from(keys, [src_p + i * size for i in range(n)], sizes) != [0] * n:
            raise SystemExit("bench: batch_put_from failed")
        dptrs = [dst_p + i * size for i in range(n)]
        sptrs = [src_p + i * size for i in range(n)]

        def get(s=s, keys=keys, dptrs=dptrs):
            got = s.batch_get_into(keys, dptrs, sizes)
            if got != sizes:
                raise SystemExit(f"bench: batch_get_into returned {got}")

        def put(s=s, path=path, sptrs=sptrs):
            # New keys each call (a put of a stored key is not rewritten),
            # named put-... so that recycle removes them between rounds.
            ks = [f"put-{path}-{size}-{next(seq)}" for _ in range(n)]
            rc = s.batch_put_from(ks, sptrs, sizes)
            if rc != [0] * n:
                raise SystemExit(f"bench: batch_put_from returned {rc}")

        gets[path], puts[path] = get, put
    out = {f"batch_get_into_x{n}": _race(gets, iters, rounds)}
    for path, (_, dst_p) in spans.items():
        if ctypes.string_at(dst_p, n * size) != ctypes.string_at(spans[path][0], n * size):
            raise SystemExit(f"bench: batch_get_into x{n} read back other bytes ({path})")
    out[f"batch_put_from_x{n}"] = _race(puts, iters, rounds, recycle)
    for t in out.values():
        t["calls"] = iters
    return out


def _table(rows: list[dict]) -> str:
    head = f"{'name':<34} {'us/call':>9} {'GB/s':>7} {'raw GB/s':>9} {'ratio':>6} {'vs memcpy':>9} {'vs socket':>9}"
    lines = [head]
    for r in rows:
        vs = f"{r['vs_socket_path']:.2f}x" if "vs_socket_path" in r else ""
        lines.append(f"{r['name']:<34} {r['us_per_call']:>9.1f} {r['gbps']:>7.2f} {r['baseline_gbps']:>9.2f} "
                     f"{r['ratio']:>5.2f}x {r['vs_memcpy']:>8.2f}x {vs:>9}")
    return "\n".join(lines)


def _size(s: str) -> int:
    from .mooncake import parse_size
    n = parse_size(s)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"size {s!r}")
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m yuebing.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8080", help="the yuebing node's HTTP address")
    p.add_argument("--sizes", default="64KiB,1MiB,4MiB", help="value sizes, comma-separated")
    p.add_argument("--bytes", default="64MiB", type=_size, help="bytes one contender moves per round (calls = bytes/size, 4 to 500)")
    p.add_argument("--rounds", default=5, type=int, help="rounds; each contender's best counts")
    p.add_argument("--quick", action="store_true", help="a sixteenth of --bytes, 2 rounds")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--batch", default=BATCH_N, type=int,
                   help=f"values per call of the batch_*_xN rows, run at 1MiB and 4MiB when in --sizes; 0 leaves them out (default {BATCH_N})")
    p.add_argument("--fresh-arena", action="store_true",
                   help="keep every put's key, so each put lands in node memory not written since start-up")
    a = p.parse_args(argv)
    try:
        sizes = [_size(x) for x in a.sizes.split(",")]
    except (ValueError, argparse.ArgumentTypeError):
        p.error(f"--sizes: {a.sizes!r} is not a list of sizes like 64KiB,1MiB")
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    if a.batch < 0:
        p.error("--batch must not be negative")
    budget, rounds = (a.bytes // 16, 2) if a.quick else (a.bytes, a.rounds)
    rows = run(a.url, sizes, budget, rounds, fresh_arena=a.fresh_arena, batch_n=a.batch)
    if a.json:
        print(json.dumps({"results": rows}))
    else:
        print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
