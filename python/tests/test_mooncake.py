"""Mooncake Store's API on a real node: every method, misses, bad arguments."""

from __future__ import annotations

import ctypes
import os
import unittest

from support import URL, SHM, client, fresh_namespace, need_server, pattern

from yuebing.mooncake import (BufferHandle, ErrorCode, MooncakeDistributedStore, MooncakeHostMemAllocator,
                              ReplicateConfig, SoftPinAction, parse_size)

NOT_FOUND, INVALID = int(ErrorCode.OBJECT_NOT_FOUND), int(ErrorCode.INVALID_PARAMS)


def hostport() -> str:
    return URL.split("://", 1)[-1]


@need_server
class MooncakeTest(unittest.TestCase):
    def setUp(self):
        self.ns = fresh_namespace()
        self.s = MooncakeDistributedStore()
        cfg = {"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE", "global_segment_size": "512MB",
               "local_buffer_size": "64 MB", "protocol": "tcp", "device_name": "", "master_server_address": hostport(),
               "namespace": self.ns, "shm": "auto" if SHM else False}
        self.assertEqual(self.s.setup(cfg), 0)
        self.addCleanup(self.s.close)
        self.buf = (ctypes.c_ubyte * (4 << 20))()
        self.ptr = ctypes.addressof(self.buf)
        self.assertEqual(self.s.register_buffer(self.ptr, 4 << 20), 0)

    def test_setup_positional(self):
        s = MooncakeDistributedStore()
        os.environ["YUEBING_NAMESPACE"] = self.ns
        try:
            self.assertEqual(s.setup("localhost", "http://localhost:8080/metadata", 512 * 1024 * 1024, 128 * 1024 * 1024,
                                     "tcp", "", hostport()), 0)
        finally:
            del os.environ["YUEBING_NAMESPACE"]
        self.assertEqual(s.get_hostname(), "localhost")
        self.assertEqual(s.put("k", b"v"), 0)
        self.assertEqual(self.s.get("k"), b"v")  # same namespace
        self.assertEqual(s.close(), 0)
        self.assertEqual(s.get("k"), b"")  # closed: a miss, never an exception
        self.assertEqual(s.put("k", b"v"), int(ErrorCode.RPC_FAIL))

    def test_setup_refusals(self):
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup("localhost", "x", "16XB", 0, "tcp", "", hostport()), INVALID)
        self.assertEqual(s.setup("localhost", "x", 1, 1, "carrier-pigeon", "", hostport()), INVALID)
        self.assertEqual(s.setup("localhost", "x", 1, 1, "tcp", "", "127.0.0.1:1"), int(ErrorCode.RPC_FAIL))
        self.assertEqual(s.setup("localhost", "x", 1, 1, "tcp", "mlx5_0", "http://" + hostport()), 0)  # devices ignored
        s.close()

    def test_parse_size(self):
        for v, want in [(5, 5), ("16MB", 16 << 20), ("16 MB", 16 << 20), ("512MiB", 512 << 20), ("1GB", 1 << 30),
                        ("2 kb", 2048), ("100", 100), ("1.5GB", 3 << 29)]:
            self.assertEqual(parse_size(v), want, v)
        for v in ("MB", "-1", "16 XB", -3, True):
            with self.assertRaises(ValueError):
                parse_size(v)

    def test_put_get(self):
        data = pattern(7, 100_000)
        self.assertEqual(self.s.put("a", data), 0)
        self.assertEqual(self.s.put("a", b"other"), 0)  # exists: kept as it is
        self.assertEqual(self.s.get("a"), data)
        self.assertEqual(self.s.get("missing"), b"")
        self.assertEqual(self.s.get_size("a"), len(data))
        self.assertEqual(self.s.get_size("missing"), NOT_FOUND)
        self.assertEqual(self.s.is_exist("a"), 1)
        self.assertEqual(self.s.is_exist("missing"), 0)
        self.assertEqual(self.s.batch_is_exist(["a", "missing", 5]), [1, 0, -1])
        self.assertEqual(self.s.put_parts("parts", b"ab", memoryview(b"cd"), bytearray(b"ef")), 0)
        self.assertEqual(self.s.get("parts"), b"abcdef")

    def test_bad_arguments(self):
        self.assertEqual(self.s.put("", b"x"), INVALID)
        self.assertEqual(self.s.put(5, b"x"), INVALID)
        self.assertEqual(self.s.put("x" * 300, b"x"), INVALID)
        self.assertEqual(self.s.put("k", b""), INVALID)
        self.assertEqual(self.s.put("k", 12), INVALID)
        self.assertEqual(self.s.get(None), b"")
        self.assertEqual(self.s.is_exist(""), -1)
        self.assertEqual(self.s.remove(""), INVALID)
        self.assertEqual(self.s.get_size(""), INVALID)
        cfg = ReplicateConfig()
        cfg.replica_num = 2  # a node alone has nowhere to put a second copy
        self.assertEqual(self.s.put("r", b"x", cfg), INVALID)
        self.assertEqual(self.s.is_exist("r"), 0)

    def test_remove(self):
        self.s.put("a", b"1")
        self.s.put("b", b"2")
        self.assertEqual(self.s.remove("a"), 0)
        self.assertEqual(self.s.remove("a"), NOT_FOUND)
        self.assertEqual(self.s.batch_remove(["b", "a"]), [0, NOT_FOUND])
        self.assertEqual(self.s.put_batch(["x", "y", "z"], [b"1", b"2", b"3"]), 0)
        other = client()  # another namespace is not touched
        self.addCleanup(other.close)
        other.put("x", b"keep")
        self.assertEqual(self.s.remove_all(), 3)
        self.assertEqual(self.s.get_batch(["x", "y", "z"]), [b"", b"", b""])
        self.assertEqual(other.get("x"), b"keep")
        self.assertEqual(self.s.remove_all(), 0)

    def test_batches(self):
        keys = [f"k{i}" for i in range(6)]
        vals = [pattern(i, 1000 * i + 1) for i in range(6)]
        self.assertEqual(self.s.put_batch(keys, vals), 0)
        self.assertEqual(self.s.get_batch(keys + ["missing"]), vals + [b""])
        self.assertEqual(self.s.put_batch(keys, vals[:2]), INVALID)
        self.assertEqual(self.s.put_batch([], []), 0)
        self.assertEqual(self.s.get_batch([]), [])
        bh = self.s.batch_get_buffer(keys[:2] + ["missing"])
        self.assertIsInstance(bh[0], BufferHandle)
        self.assertEqual([b.size() if b else None for b in bh], [1, 1001, None])
        self.assertEqual(bytes(memoryview(bh[1])), vals[1])
        self.assertEqual(ctypes.string_at(bh[1].ptr(), bh[1].size()), vals[1])
        self.assertEqual(len(self.s.get_buffer("k3")), 3001)
        self.assertIsNone(self.s.get_buffer("missing"))

    def test_zero_copy(self):
        data = pattern(9, 1 << 20)
        ctypes.memmove(self.ptr, data, len(data))
        self.assertEqual(self.s.put_from("z", self.ptr, len(data)), 0)
        ctypes.memset(self.ptr, 0, 2 << 20)
        self.assertEqual(self.s.get_into("z", self.ptr + (1 << 20), 2 << 20), len(data))
        self.assertEqual(ctypes.string_at(self.ptr + (1 << 20), len(data)), data)
        self.assertEqual(self.s.get("z"), data)
        self.assertEqual(self.s.get_into("missing", self.ptr, 100), NOT_FOUND)
        self.assertEqual(self.s.get_into("z", self.ptr, 100), INVALID)  # does not fit
        # Unregistered memory is refused, never read or written.
        other = (ctypes.c_ubyte * 4096)()
        self.assertEqual(self.s.get_into("z", ctypes.addressof(other), 4096), INVALID)
        self.assertEqual(self.s.put_from("u", ctypes.addressof(other), 10), INVALID)
        self.assertEqual(self.s.put_from("u", self.ptr + (4 << 20) - 5, 10), INVALID)  # runs past the end
        self.assertEqual(self.s.put_from("u", self.ptr, 0), 0)  # Mooncake: nothing stored, success
        self.assertEqual(self.s.is_exist("u"), 0)
        same_node = ReplicateConfig()
        same_node.prefer_alloc_in_same_node = True  # only the *_multi_buffers calls take it
        self.assertEqual(self.s.put_from("u", self.ptr, 10, same_node), INVALID)
        self.assertEqual(self.s.put("u", b"x", same_node), INVALID)
        self.assertEqual(self.s.unregister_buffer(ctypes.addressof(other)), INVALID)
        self.assertEqual(self.s.register_buffer(0, 10), INVALID)
        self.assertEqual(self.s.register_buffer(self.ptr, -1), INVALID)

    def test_batch_zero_copy(self):
        vals = [pattern(20 + i, 64 << 10) for i in range(4)]
        for i, v in enumerate(vals):
            ctypes.memmove(self.ptr + i * (64 << 10), v, len(v))
        keys = [f"b{i}" for i in range(4)]
        ptrs = [self.ptr + i * (64 << 10) for i in range(4)]
        self.assertEqual(self.s.batch_put_from(keys, ptrs, [64 << 10] * 4), [0] * 4)
        self.assertEqual(self.s.batch_put_from(keys, ptrs[:3], [1] * 4), [INVALID] * 4)
        self.assertEqual(self.s.batch_put_from(["ok", ""], ptrs[:2], [10, 10]), [0, INVALID])
        dst = [self.ptr + (2 << 20) + i * (64 << 10) for i in range(5)]
        got = self.s.batch_get_into(keys + ["missing"], dst, [64 << 10] * 4 + [100])
        self.assertEqual(got, [64 << 10] * 4 + [NOT_FOUND])
        for i, v in enumerate(vals):
            self.assertEqual(ctypes.string_at(dst[i], len(v)), v)
        self.assertEqual(self.s.batch_get_into(keys, dst[:2], [1]), [INVALID] * 4)
        self.assertEqual(self.s.batch_get_into(keys[:1], dst[:1], [100]), [INVALID])  # does not fit

    def test_get_into_ranges(self):
        k1, k2 = pattern(31, 64), pattern(32, 64)
        self.s.put("key1", k1)
        self.s.put("key2", k2)
        b0 = (ctypes.c_ubyte * 32)()
        b1 = (ctypes.c_ubyte * 32)()
        p0, p1 = ctypes.addressof(b0), ctypes.addressof(b1)
        self.s.register_buffer(p0, 32)
        self.s.register_buffer(p1, 32)
        res = self.s.get_into_ranges([p0, p1], [["key1", "key2"], ["key2", "key1"]],
                                     [[[0, 20], [8]], [[4], [16]]], [[[1, 30], [2]], [[0], [10]]],
                                     [[[4, 3], [5]], [[6], [4]]])
        self.assertEqual(res, [[[4, 3], [5]], [[6], [4]]])
        self.assertEqual(bytes(b0[0:4]), k1[1:5])
        self.assertEqual(bytes(b0[20:23]), k1[30:33])
        self.assertEqual(bytes(b0[8:13]), k2[2:7])
        self.assertEqual(bytes(b1[4:10]), k2[0:6])
        self.assertEqual(bytes(b1[16:20]), k1[10:14])
        # A missing key, a source range past the end, a destination past the
        # buffer: those fragments fail, the others still land.
        res = self.s.get_into_ranges([p0], [["missing", "key1"]], [[[0], [0, 30]]], [[[0], [60, 0]]], [[[4], [10, 4]]])
        self.assertEqual(res[0][0], [NOT_FOUND])
        self.assertLess(res[0][1][0], 0)
        self.assertEqual(res[0][1][1], INVALID)
        # Shapes that do not match.
        res = self.s.get_into_ranges([p0], [["key1"]], [[[0, 1]]], [[[0]]], [[[1]]])
        self.assertEqual(res, [[[INVALID, INVALID]]])
        res = self.s.get_into_ranges([p0, p1], [["key1"]], [[[0]]], [[[0]]], [[[1]]])
        self.assertTrue(all(x < 0 for row in res for f in row for x in f))

    def test_upsert_and_soft_pin(self):
        native = client(namespace=self.ns)
        self.addCleanup(native.close)
        cfg = ReplicateConfig()
        cfg.with_soft_pin = True
        cfg.soft_pin_ttl_ms = 60_000
        self.assertEqual(self.s.put("sys", b"system prompt", cfg), 0)
        ctxs = native.list_contexts()
        self.assertEqual(len(ctxs), 1)
        view = native.get_context(ctxs[0]["id"])
        self.assertEqual(view["resident"]["dram"], 1)
        self.assertIn(view["ttl_seconds"], range(50, 61))
        # Upsert replaces the bytes; PRESERVE keeps the pin.
        self.assertEqual(self.s.upsert("sys", b"new prompt"), 0)
        self.assertEqual(self.s.get("sys"), b"new prompt")
        self.assertEqual(len(native.list_contexts()), 1)
        off = ReplicateConfig()
        off.soft_pin_action = SoftPinAction.DISABLE
        self.assertEqual(self.s.upsert("sys", b"newer", off), 0)
        self.assertEqual(native.list_contexts(), [])
        on = ReplicateConfig()
        on.soft_pin_action = SoftPinAction.ENABLE
        on.soft_pin_ttl_ms = 0  # Mooncake: a zero TTL pins nothing
        self.assertEqual(self.s.upsert("sys", b"x", on), 0)
        self.assertEqual(native.list_contexts(), [])
        on.soft_pin_ttl_ms = None  # the default TTL
        self.assertEqual(self.s.upsert("sys", b"y", on), 0)
        self.assertEqual(len(native.list_contexts()), 1)
        self.assertEqual(self.s.remove("sys"), 0)  # removing drops the pin
        self.assertEqual(native.list_contexts(), [])
        self.assertEqual(self.s.upsert("", b"x"), INVALID)
        # Mooncake's checks, before anything is written: a TTL needs ENABLE
        # (or with_soft_pin) and must not be over the limit; a value the
        # binding's unsigned field cannot hold is a TypeError on assignment.
        for v in (-1, 1 << 64, 1.5, "10"):
            with self.assertRaises(TypeError, msg=repr(v)):
                ReplicateConfig().soft_pin_ttl_ms = v
        with self.assertRaises(TypeError):
            ReplicateConfig().replica_num = -1
        with self.assertRaises(TypeError):
            ReplicateConfig().with_hard_pin = 1
        with self.assertRaises(AttributeError):
            ReplicateConfig().replicas = 2
        for action, ttl in [(SoftPinAction.PRESERVE, 10), (SoftPinAction.DISABLE, 10),
                            (SoftPinAction.ENABLE, 10**12)]:
            bad = ReplicateConfig()
            bad.soft_pin_action, bad.soft_pin_ttl_ms = action, ttl
            self.assertEqual(self.s.put("never", b"x", bad), INVALID, (action, ttl))
            self.assertEqual(self.s.batch_put_from(["never"], [self.ptr], [1], bad), [INVALID])
        self.assertEqual(self.s.is_exist("never"), 0)
        self.assertIn("soft_pin_action=ENABLE", str(on))

    def test_multi_buffers(self):
        # vLLM's layout: a block's object is one buffer per layer, here
        # scattered over the registered region out of order.
        layers, n = 4, 48 << 10
        vals = [pattern(40 + i, layers * n) for i in range(3)]
        keys = [f"blk{i}" for i in range(3)]
        src = [[self.ptr + ((l * 3 + i) * n) for l in range(layers)] for i in range(3)]
        for i, v in enumerate(vals):
            for l in range(layers):
                ctypes.memmove(src[i][l], v[l * n:(l + 1) * n], n)
        sizes = [[n] * layers for _ in range(3)]
        self.assertEqual(self.s.batch_put_from_multi_buffers(keys, src, sizes), [0, 0, 0])
        self.assertEqual(self.s.get("blk1"), vals[1])  # stored as the buffers joined
        dst = [[self.ptr + (2 << 20) + ((i * layers + (layers - 1 - l)) * n) for l in range(layers)] for i in range(3)]
        ctypes.memset(self.ptr + (2 << 20), 0, 2 << 20)
        got = self.s.batch_get_into_multi_buffers(keys + ["missing"], dst + [[dst[0][0]]], sizes + [[n]])
        self.assertEqual(got, [layers * n] * 3 + [NOT_FOUND])
        for i, v in enumerate(vals):
            for l in range(layers):
                self.assertEqual(ctypes.string_at(dst[i][l], n), v[l * n:(l + 1) * n], (i, l))
        # One buffer per key reads straight in; buffers larger than the
        # object take what it has; smaller ones are refused, writing nothing.
        self.assertEqual(self.s.batch_get_into_multi_buffers(["blk0"], [[dst[0][0]]], [[layers * n]]), [layers * n])
        self.assertEqual(ctypes.string_at(dst[0][0], layers * n), vals[0])
        self.assertEqual(self.s.batch_get_into_multi_buffers(["blk2"], [dst[1][:2]], [[n * layers, n]]), [layers * n])
        self.assertEqual(ctypes.string_at(dst[1][0], layers * n), vals[2])
        ctypes.memset(dst[2][0], 7, n)
        self.assertEqual(self.s.batch_get_into_multi_buffers(["blk2"], [dst[2][:2]], [[n, n]]), [INVALID])
        self.assertEqual(ctypes.string_at(dst[2][0], n), b"\x07" * n)
        # Shapes that do not match fail every key, as in Mooncake.
        self.assertEqual(self.s.batch_put_from_multi_buffers(keys[:2], src[:2], [sizes[0], [n]]), [INVALID] * 2)
        self.assertEqual(self.s.batch_get_into_multi_buffers(keys[:2], dst[:1], sizes[:2]), [INVALID] * 2)
        # Unregistered memory and bad keys fail only their own key.
        other = (ctypes.c_ubyte * 64)()
        self.assertEqual(self.s.batch_put_from_multi_buffers(["x", "", "y"], [[ctypes.addressof(other)], [self.ptr], [self.ptr]],
                                                             [[8], [8], [8]]), [INVALID, INVALID, 0])
        same_node = ReplicateConfig()
        same_node.prefer_alloc_in_same_node = True  # taken here
        self.assertEqual(self.s.batch_put_from_multi_buffers(["z"], [[self.ptr, self.ptr + 8]], [[8, 8]], same_node), [0])
        self.assertEqual(self.s.get("z"), ctypes.string_at(self.ptr, 16))

    def test_host_allocator(self):
        a = MooncakeHostMemAllocator()
        ptr = a.alloc(1 << 20)
        self.assertNotEqual(ptr, 0)
        self.addCleanup(a.free, ptr)
        data = pattern(50, 1 << 20)
        ctypes.memmove(ptr, data, len(data))
        # Allocator memory needs no register_buffer.
        self.assertEqual(self.s.put_from("alloc", ptr, len(data)), 0)
        ctypes.memset(ptr, 0, len(data))
        self.assertEqual(self.s.get_into("alloc", ptr, len(data)), len(data))
        self.assertEqual(ctypes.string_at(ptr, len(data)), data)
        self.assertEqual(a.alloc(0), 0)
        self.assertEqual(a.free(12345), INVALID)
        p2 = a.alloc(4096)
        self.assertEqual(a.free(p2), 0)
        self.assertEqual(self.s.put_from("freed", p2, 16), INVALID)  # no longer ours to read

    def test_setup_forms(self):
        s = MooncakeDistributedStore()
        self.addCleanup(s.close)
        # Newer Mooncake callers (SGLang) pass these by keyword.
        self.assertEqual(s.setup("localhost", "P2PHANDSHAKE", 1 << 30, 1 << 26, "tcp", "", hostport(), None,
                                 enable_client_http_server=False, ssd_offload_path="", tenant_id=self.ns.split("/")[1]), 0)
        self.assertEqual(s.put("t", b"tenant"), 0)
        native = client(namespace="mooncake/" + self.ns.split("/")[1])
        self.addCleanup(native.close)
        self.assertEqual(native.get("t"), b"tenant")
        self.assertEqual(s.remove_all(force=True), 1)
        self.assertEqual(s.setup("localhost", "x", 1, 1, "tcp", "", hostport(), tenant_id="a/b"), INVALID)
        d = MooncakeDistributedStore()
        self.addCleanup(d.close)
        self.assertEqual(d.setup_dummy(1 << 30, 1 << 26, hostport()), 0)
        self.assertEqual(d.put("dummy", b"x"), 0)
        self.assertEqual(d.remove("dummy"), 0)

    def test_upsert_from(self):
        ctypes.memmove(self.ptr, b"first", 5)
        self.assertEqual(self.s.upsert_from("u", self.ptr, 5), 0)
        ctypes.memmove(self.ptr, b"second", 6)
        self.assertEqual(self.s.upsert_from("u", self.ptr, 6), 0)
        self.assertEqual(self.s.get("u"), b"second")

    def test_upserts(self):
        self.assertEqual(self.s.put("p", b"old"), 0)
        self.assertEqual(self.s.upsert_parts("p", b"ne", memoryview(b"w!")), 0)
        self.assertEqual(self.s.get("p"), b"new!")
        self.assertEqual(self.s.upsert_batch(["p", "q"], [b"one", b"two"]), 0)
        self.assertEqual(self.s.get_batch(["p", "q"]), [b"one", b"two"])
        self.assertEqual(self.s.upsert_batch(["p", "q"], [b"x"]), INVALID)
        self.assertEqual(self.s.get("p"), b"one")  # a refused batch writes nothing
        ctypes.memmove(self.ptr, b"AAAABBBB", 8)
        self.assertEqual(self.s.batch_upsert_from(["p", "r"], [self.ptr, self.ptr + 4], [4, 4]), [0, 0])
        self.assertEqual(self.s.get_batch(["p", "r"]), [b"AAAA", b"BBBB"])
        self.assertEqual(self.s.batch_upsert_from(["p", "r"], [self.ptr], [4, 4]), [INVALID, INVALID])
        unreg = (ctypes.c_ubyte * 8)()
        self.assertEqual(self.s.batch_upsert_from(["p", "r"], [ctypes.addressof(unreg), self.ptr], [4, 4]),
                         [INVALID, 0])

    def test_put_from_with_metadata(self):
        ctypes.memmove(self.ptr, b"payload", 7)
        ctypes.memmove(self.ptr + 4096, b"META", 4)
        self.assertEqual(self.s.put_from_with_metadata("m", self.ptr, self.ptr + 4096, 7, 4), 0)
        self.assertEqual(self.s.get("m"), b"METApayload")  # metadata first, as Mooncake writes it
        unreg = (ctypes.c_ubyte * 8)()
        self.assertEqual(self.s.put_from_with_metadata("n", self.ptr, ctypes.addressof(unreg), 7, 4), INVALID)
        self.assertEqual(self.s.is_exist("n"), 0)

    def test_sessions(self):
        data = pattern(3, 10000)
        self.assertEqual(self.s.put("g", data), 0)
        self.assertEqual(self.s.batch_get_session_start(["g", "missing", 7]), [0, NOT_FOUND, INVALID])
        p = self.ptr
        got = self.s.batch_get_into_multi_buffer_ranges(
            ["g", "missing", "g"], [[p, p + 100], [p + 200], [p + 300]], [[10, 10], [5], [1]], [[0, 9990], [0], [10000]])
        self.assertEqual(got, [20, INVALID, INVALID])  # no session; a range past the end
        self.assertEqual(ctypes.string_at(p, 10), data[:10])
        self.assertEqual(ctypes.string_at(p + 100, 10), data[9990:])
        self.assertEqual(self.s.batch_get_session_end(["g"]), 0)
        self.assertEqual(self.s.batch_get_into_multi_buffer_ranges(["g"], [[p]], [[10]], [[0]]), [INVALID])

        ctypes.memmove(p, b"0123456789", 10)
        self.assertEqual(self.s.batch_put_session_start(["s1", "s2", "s3"], [8, 4, 0]), [0, 0, INVALID])
        got = self.s.batch_put_from_multi_buffer_ranges(
            ["s1", "s2", "none"], [[p, p + 5], [p + 6], [p]], [[4, 4], [4], [1]], [[4, 0], [1], [0]])
        self.assertEqual(got, [8, INVALID, INVALID])  # s2: 4 bytes at offset 1 run past its 4
        self.assertEqual(self.s.is_exist("s1"), 0)  # not readable before the end
        self.assertEqual(self.s.batch_put_session_revoke(["s2", "s2"]), [0, INVALID])
        self.assertEqual(self.s.batch_put_session_end(["s1", "s2"]), [0, INVALID])
        self.assertEqual(self.s.get("s1"), b"56780123")
        self.assertEqual(self.s.is_exist("s2"), 0)

    def test_remove_by_regex(self):
        keys = ["req1_tp_0", "req1_tp_1", "req2_tp_0", "other", "x.y", "xzy"]
        self.assertEqual(self.s.put_batch(keys, [b"v"] * len(keys)), 0)
        other = client()  # another namespace is not touched
        self.addCleanup(other.close)
        other.put("req1_tp_0", b"keep")
        self.assertEqual(self.s.remove_by_regex("(unclosed"), INVALID)
        self.assertEqual(self.s.remove_by_regex("req(?=1)"), INVALID)  # lookahead: Python has it, the node (RE2) not
        self.assertEqual(self.s.remove_by_regex("\\"), INVALID)  # a trailing backslash
        self.assertEqual(self.s.batch_is_exist(keys), [1] * len(keys))  # a refused pattern removes nothing
        self.assertEqual(self.s.remove_by_regex("_tp_0$"), 2)  # a search: anywhere in the key
        self.assertEqual(self.s.batch_is_exist(keys), [0, 1, 0, 1, 1, 1])
        self.assertEqual(self.s.remove_by_regex(r"x\.y"), 1)
        self.assertEqual(self.s.batch_is_exist(["x.y", "xzy"]), [0, 1])
        self.assertEqual(self.s.remove_by_regex("^nothing-matches"), 0)
        self.assertEqual(self.s.remove_by_regex("(?<name>xz)y"), 1)  # RE2 (and ECMAScript) syntax Python's re lacks
        self.assertEqual(self.s.remove_by_regex(""), 2)  # the empty pattern matches every key
        self.assertEqual(self.s.batch_is_exist(keys), [0] * len(keys))
        self.assertEqual(other.get("req1_tp_0"), b"keep")
        s = MooncakeDistributedStore()
        self.assertEqual(s.remove_by_regex(".*"), int(ErrorCode.RPC_FAIL))  # before setup


if __name__ == "__main__":
    unittest.main()
