"""A node of a two-node cluster killed just before or during Mooncake's
batch calls: the keys it held come back with Mooncake's negative codes
(or 0 from batch_is_exist), the rest with their bytes, nothing raises,
no result claims a value that did not arrive whole, and a follow-up get
finds each key whole or not at all. The cluster is started here from
YUEBING_BIN, so each test kills a node of its own."""

from __future__ import annotations

import ctypes
import shutil
import tempfile
import threading
import time
import unittest

from support import SHM, need_binary, pattern, start_cluster

from yuebing.mooncake import ErrorCode, MooncakeDistributedStore

NOT_FOUND, RPC_FAIL, RPC_TIMEOUT = int(ErrorCode.OBJECT_NOT_FOUND), int(ErrorCode.RPC_FAIL), int(ErrorCode.RPC_TIMEOUT)
SIZE = 256 << 10  # bytes per value: several pages, so a torn copy would show
N = 16  # keys per node


@need_binary
class DeadNodeBatchTest(unittest.TestCase):
    def setUp(self):
        root = tempfile.mkdtemp(prefix="yb-dead-")
        self.addCleanup(shutil.rmtree, root, True)
        self.a, self.b = start_cluster(root)
        self.addCleanup(self.a.kill)
        self.addCleanup(self.b.kill)
        self.sa, self.sb = self.store(self.a.url), self.store(self.b.url)
        # One registered buffer per store: values from [0, 2N*SIZE), reads
        # into [2N*SIZE, 4N*SIZE).
        self.mem = (ctypes.c_ubyte * (4 * N * SIZE))()
        self.ptr = ctypes.addressof(self.mem)
        for s in (self.sa, self.sb):
            self.assertEqual(s.register_buffer(self.ptr, len(self.mem)), 0)
        self.akeys = [f"on-a-{i}" for i in range(N)]
        self.bkeys = [f"on-b-{i}" for i in range(N)]
        self.values = {k: pattern(i, SIZE) for i, k in enumerate(self.akeys + self.bkeys)}
        for i, k in enumerate(self.akeys + self.bkeys):
            ctypes.memmove(self.ptr + i * SIZE, self.values[k], SIZE)
        ptrs = [self.ptr + i * SIZE for i in range(2 * N)]
        self.assertEqual(self.sa.batch_put_from(self.akeys, ptrs[:N], [SIZE] * N), [0] * N)
        self.assertEqual(self.sb.batch_put_from(self.bkeys, ptrs[N:], [SIZE] * N), [0] * N)
        # Until the leader's index has b's keys, a reports them missing
        # whether b lives or not; wait so that a miss below is b's death.
        # The wait asks the index only: a batch exists through a reads
        # b's blocks, and a may keep the copies it read.
        c = self.sa._client()
        deadline = time.monotonic() + 10
        while not all(c.holders(self.bkeys)):
            self.assertLess(time.monotonic(), deadline, "the index never heard of node b's keys")
            time.sleep(0.05)

    def store(self, url: str) -> MooncakeDistributedStore:
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup({"master_server_address": url, "namespace": "dead/batch",
                                  "shm": "auto" if SHM else False}), 0)
        self.addCleanup(s.close)
        return s

    def read_all(self, store, keys):
        """batch_get_into of keys into the read half, filled with 0xEE
        first; returns the codes and each key's bytes there."""
        base = self.ptr + 2 * N * SIZE
        ctypes.memset(base, 0xEE, 2 * N * SIZE)
        got = store.batch_get_into(keys, [base + i * SIZE for i in range(len(keys))], [SIZE] * len(keys))
        return got, [ctypes.string_at(base + i * SIZE, SIZE) for i in range(len(keys))]

    def check_reads(self, keys, got, seen):
        """Each key read whole, or (only b's) failed with a negative code,
        and then a follow-up get finds it whole or not at all. Over shared
        memory a failed key's buffer is as it was; over the socket a body
        cut off by the dying node may have written part of it, as a failed
        transfer may in Mooncake: the negative code says not to use it."""
        untouched = b"\xee" * SIZE
        for k, code, data in zip(keys, got, seen):
            if code == SIZE:
                self.assertEqual(data, self.values[k], k)
                continue
            self.assertIn(code, (NOT_FOUND, RPC_FAIL, RPC_TIMEOUT, int(ErrorCode.TRANSFER_FAIL)), k)
            self.assertIn(k, self.bkeys, f"{k}, held by the node that lives, failed: {code}")
            if SHM:
                self.assertEqual(data, untouched, f"{k}: failed with {code} but its buffer was written")
            self.assertIn(self.sa.get(k), (b"", self.values[k]), k)

    def test_killed_before_the_batch(self):
        self.b.kill()
        keys = [k for pair in zip(self.akeys, self.bkeys) for k in pair]  # interleaved
        got, seen = self.read_all(self.sa, keys)
        self.check_reads(keys, got, seen)
        self.assertEqual([c for k, c in zip(keys, got) if k in self.akeys], [SIZE] * N)
        self.assertEqual([c for k, c in zip(keys, got) if k in self.bkeys], [NOT_FOUND] * N)
        # The node's own answer for the cluster: b's keys are gone once b
        # does not answer, though the leader's index lists them until b's
        # lease ends.
        self.assertEqual(self.sa.batch_is_exist(keys), [1 if k in self.akeys else 0 for k in keys])
        self.assertEqual(self.sa.get(self.bkeys[0]), b"")
        self.assertEqual(self.sa.get_size(self.bkeys[0]), NOT_FOUND)
        # The store that spoke to b: every key fails, nothing raises.
        self.assertEqual(self.sb.batch_is_exist(keys), [-1] * len(keys))
        got, seen = self.read_all(self.sb, keys)
        self.assertTrue(all(c in (RPC_FAIL, RPC_TIMEOUT) for c in got), got)
        self.assertTrue(all(d == b"\xee" * SIZE for d in seen))
        self.assertTrue(all(c in (RPC_FAIL, RPC_TIMEOUT) for c in self.sb.batch_put_from(["x"], [self.ptr], [SIZE])))
        # The survivor still takes writes, and reads them back whole.
        new = [f"after-{i}" for i in range(4)]
        self.assertEqual(self.sa.batch_put_from(new, [self.ptr + i * SIZE for i in range(4)], [SIZE] * 4), [0] * 4)
        got, seen = self.read_all(self.sa, new)
        self.assertEqual(got, [SIZE] * 4)
        self.assertEqual(seen, [self.values[k] for k in self.akeys[:4]])

    def test_killed_during_reads(self):
        keys = self.bkeys + self.akeys
        killer = threading.Timer(0.002, self.b.kill)
        killer.start()
        try:
            for _ in range(5):  # the kill lands before, in or after one of these
                got, seen = self.read_all(self.sa, keys)
                self.check_reads(keys, got, seen)
        finally:
            killer.join()
        got, seen = self.read_all(self.sa, keys)
        self.check_reads(keys, got, seen)
        self.assertEqual(got[N:], [SIZE] * N)

    def test_killed_during_writes(self):
        keys = [f"w-{i}" for i in range(2 * N)]
        ptrs = [self.ptr + i * SIZE for i in range(2 * N)]
        want = {k: self.values[src] for k, src in zip(keys, self.akeys + self.bkeys)}
        killer = threading.Timer(0.005, self.b.kill)
        killer.start()
        results = []
        try:
            for r in range(4):  # into the node being killed
                results.append(self.sb.batch_put_from([f"{k}-{r}" for k in keys], ptrs, [SIZE] * len(keys)))
        finally:
            killer.join()
        for codes in results:
            self.assertEqual(len(codes), len(keys))
            self.assertTrue(all(c == 0 or c in (RPC_FAIL, RPC_TIMEOUT) for c in codes), codes)
        self.assertTrue(all(c in (RPC_FAIL, RPC_TIMEOUT) for c in results[-1]) or self.b.proc.poll() is not None)
        # Whatever was written, a reader through the survivor gets a whole
        # value or a miss: never part of one.
        for r in range(4):
            for k in keys:
                v = self.sa.get(f"{k}-{r}")
                self.assertIn(v, (b"", want[k]), f"{k}-{r}: {len(v)} bytes")
                n = self.sa.get_size(f"{k}-{r}")
                self.assertIn(n, (NOT_FOUND, SIZE), f"{k}-{r}")
        # And through the survivor, the same batch is stored whole.
        self.assertEqual(self.sa.batch_put_from(keys, ptrs, [SIZE] * len(keys)), [0] * len(keys))
        got, seen = self.read_all(self.sa, keys)
        self.assertEqual(got, [SIZE] * len(keys))
        self.assertEqual(seen, [want[k] for k in keys])


if __name__ == "__main__":
    unittest.main()
