"""Mooncake's tensor format on a real node: header bytes built here field
by field from Mooncake's C structs (integration_utils.h, releases 0.3.11
on) must be what put_tensor writes and what get_tensor reads, and the
tensor-parallel calls store one shard per rank under Mooncake's key
names with its shard header."""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
import unittest

from support import URL, SHM, fresh_namespace, need_server

from yuebing import _tensor
from yuebing.mooncake import ErrorCode, MooncakeDistributedStore, ReplicateConfig

try:
    import torch
except ImportError:
    torch = None

INVALID, NOT_FOUND = int(ErrorCode.INVALID_PARAMS), int(ErrorCode.OBJECT_NOT_FOUND)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NEED_TORCH = "torch is not importable: apt-get install python3-torch python3-numpy"


def mooncake_header(dtype: int, global_shape, local_shape=None, kind: int = 0, axes=()) -> bytes:
    """TensorMetadata as Mooncake's BuildTensorMetadata fills it, written
    out struct by struct: TensorObjectHeader, the two TensorShape arrays
    of 8 int64 (-1 past ndim), axis_count and reserved0, then 4 LayoutAxis
    of 6 int32 and one int64 (zero where unused). data_bytes is computed
    from local_shape and the dtype's size."""
    local_shape = list(global_shape if local_shape is None else local_shape)
    size = {0: 4, 1: 8, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 4, 8: 8, 9: 8, 10: 1, 11: 2, 12: 2, 13: 1, 14: 1}[dtype]
    for d in local_shape:
        size *= d
    ndim = len(global_shape)
    obj = struct.pack("<I", 0x4D4F4F4E) + struct.pack("<H", 1) + struct.pack("<H", 304) + \
        struct.pack("<i", dtype) + struct.pack("<i", ndim) + struct.pack("<I", kind) + struct.pack("<I", 0) + \
        struct.pack("<Q", 304) + struct.pack("<Q", size)
    pad = [-1] * (8 - ndim)
    layout = b"".join(struct.pack("<q", d) for d in list(global_shape) + pad) + \
        b"".join(struct.pack("<q", d) for d in local_shape + pad) + struct.pack("<I", len(axes)) + struct.pack("<I", 0)
    for i in range(4):
        a = axes[i] if i < len(axes) else (0, 0, 0, 0, 0, 0, 0)
        layout += struct.pack("<6i", *a[:6]) + struct.pack("<q", a[6])
    out = obj + layout
    assert len(out) == 304
    return out


class HeaderTest(unittest.TestCase):
    """The header alone: no torch, no node."""

    def test_layout(self):
        h = mooncake_header(0, [2, 3])
        self.assertEqual(_tensor.Header(0, [2, 3]).pack(), h)
        self.assertEqual(h[:4], b"NOOM")  # the magic, little-endian
        p = _tensor.parse(h + bytes(24))
        self.assertEqual((p.dtype, p.ndim, p.local_shape, p.data_bytes, p.layout_kind), (0, 2, [2, 3], 24, 0))
        shard = mooncake_header(11, [4, 6], [4, 3], 1, [(1, 0, 1, 2, 1, 0, 3)])
        self.assertEqual(_tensor.Header(11, [4, 6], [4, 3], 1, [(1, 0, 1, 2, 1, 0, 3)]).pack(), shard)
        p = _tensor.parse(shard + bytes(24))
        self.assertEqual((p.global_shape, p.local_shape, p.axes), ([4, 6], [4, 3], [(1, 0, 1, 2, 1, 0, 3)]))

    def test_refusals(self):
        good = mooncake_header(6, [5])
        body = bytes(20)
        self.assertIsNotNone(_tensor.parse(good + body))
        for name, data in [
            ("short", good[:300]),
            ("body one byte short", good + body[:-1]),
            ("body one byte long", good + body + b"x"),
            ("bad magic", b"MOON" + good[4:] + body),
            ("version 2", good[:4] + struct.pack("<H", 2) + good[6:] + body),
            ("unknown dtype", good[:8] + struct.pack("<i", 15) + good[12:] + body),
            ("9 dims", good[:12] + struct.pack("<i", 9) + good[16:] + body),
            ("layout kind 2", good[:16] + struct.pack("<I", 2) + good[20:] + body),
            ("dim set past ndim", good[:48] + struct.pack("<q", 7) + good[56:] + body),
            ("5 axes", good[:168] + struct.pack("<I", 5) + good[172:] + body),
            # Mooncake's pre-0.3.11 header: dtype, ndim, shape[4].
            ("legacy 40 bytes", struct.pack("<ii4q", 6, 1, 5, -1, -1, -1) + body),
        ]:
            self.assertIsNone(_tensor.parse(data), name)
        # An axis whose rank is outside its count.
        bad = mooncake_header(6, [10], [5], 1, [(1, 0, 2, 2, 0, 0, 5)])
        self.assertIsNone(_tensor.parse(bad + body))

    def test_without_torch(self):
        # torch stays optional: with it unimportable the package loads,
        # headers pack and parse, and the tensor calls refuse a non-tensor.
        code = ("import sys; sys.modules['torch'] = None; sys.path.insert(0, sys.argv[1])\n"
                "from yuebing import _tensor; from yuebing.mooncake import MooncakeDistributedStore\n"
                "h = _tensor.Header(0, [2]).pack(); assert _tensor.parse(h + bytes(8)).local_shape == [2]\n"
                "s = MooncakeDistributedStore()\n"
                "assert s.put_tensor('k', [1.0]) == -600 and s.put_tensor_with_tp('k', [1.0], 0, 2) == -600\n"
                "assert s.batch_put_tensor_with_tp(['k'], [[1.0]], 0, 2) == [-600]\n")
        r = subprocess.run([sys.executable, "-c", code, ROOT], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)


@need_server
@unittest.skipIf(torch is None, NEED_TORCH)
class TensorTest(unittest.TestCase):
    def setUp(self):
        self.s = MooncakeDistributedStore()
        self.assertEqual(self.s.setup({"master_server_address": URL, "namespace": fresh_namespace(),
                                       "shm": "auto" if SHM else False}), 0)
        self.addCleanup(self.s.close)
        self.buf = (ctypes.c_ubyte * (1 << 20))()
        self.ptr = ctypes.addressof(self.buf)
        self.assertEqual(self.s.register_buffer(self.ptr, 1 << 20), 0)

    def test_bytes_both_ways(self):
        t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
        want = mooncake_header(0, [2, 3, 4]) + struct.pack("<24f", *range(24))
        self.assertEqual(self.s.put_tensor("t", t), 0)
        self.assertEqual(self.s.get("t"), want)  # what Mooncake's bindings write
        self.assertEqual(self.s.put("m", want), 0)  # as if written by Mooncake
        got = self.s.get_tensor("m")
        self.assertTrue(torch.equal(got, t) and got.dtype == torch.float32)
        # Every dtype of Mooncake's this torch has, and its code.
        for code, (name, size) in _tensor.DTYPES.items():
            dt = getattr(torch, name, None)
            if dt is None:
                continue
            x = torch.ones(3, 2, dtype=dt)
            self.assertEqual(self.s.put_tensor(f"d{code}", x), 0, name)
            data = self.s.get(f"d{code}")
            self.assertEqual(data[:304], mooncake_header(code, [3, 2]), name)
            self.assertEqual(len(data), 304 + 6 * size, name)
            back = self.s.get_tensor(f"d{code}")
            self.assertEqual(back.dtype, dt, name)
            self.assertTrue(torch.equal(back.to(torch.float32), x.to(torch.float32)), name)

    def test_shapes(self):
        five = torch.arange(32, dtype=torch.int16).reshape(2, 2, 2, 2, 2)
        self.assertEqual(self.s.put_tensor("five", five), 0)  # 8 dimensions allowed since 0.3.11
        self.assertTrue(torch.equal(self.s.get_tensor("five"), five))
        self.assertEqual(self.s.put_tensor("nine", torch.zeros([1] * 9)), INVALID)
        empty = torch.zeros(0, 3)
        self.assertEqual(self.s.put_tensor("empty", empty), 0)
        self.assertEqual(self.s.get("empty"), mooncake_header(0, [0, 3]))
        self.assertEqual(tuple(self.s.get_tensor("empty").shape), (0, 3))
        scalar = torch.tensor(2.5, dtype=torch.float64)
        self.assertEqual(self.s.put_tensor("scalar", scalar), 0)
        self.assertTrue(torch.equal(self.s.get_tensor("scalar"), scalar))
        strided = torch.arange(12, dtype=torch.int32).reshape(3, 4).t()
        self.assertEqual(self.s.put_tensor("strided", strided), 0)  # stored contiguous
        self.assertTrue(torch.equal(self.s.get_tensor("strided"), strided))
        self.assertEqual(self.s.put_tensor("bad", [1, 2]), INVALID)
        self.assertEqual(self.s.put("raw", b"x" * 400), 0)
        self.assertIsNone(self.s.get_tensor("raw"))
        into = self.s.get_tensor_into("five", self.ptr, 1 << 20)
        self.assertTrue(torch.equal(into, five))
        self.assertEqual(into.data_ptr(), self.ptr + 304)  # a view of the registered buffer, past the header

    def test_tensor_parallel(self):
        t = torch.arange(24, dtype=torch.float16).reshape(4, 6)
        self.assertEqual(self.s.put_tensor_with_tp("w", t, tp_rank=0, tp_size=2, split_dim=1), 0)
        self.assertEqual(self.s.batch_is_exist(["w", "w_tp_0", "w_tp_1", "w_tp_2"]), [0, 1, 1, 0])
        for rank in (0, 1):
            part = t[:, 3 * rank:3 * rank + 3].contiguous()
            want = mooncake_header(11, [4, 6], [4, 3], 1, [(1, 0, rank, 2, 1, 0, 3)]) + \
                part.reshape(-1).view(torch.uint8).numpy().tobytes()
            self.assertEqual(self.s.get(f"w_tp_{rank}"), want, rank)
            self.assertTrue(torch.equal(self.s.get_tensor_with_tp("w", tp_rank=rank, tp_size=2), part))
            got = self.s.get_tensor_with_tp_into("w", self.ptr, 1 << 20, tp_rank=rank, tp_size=2)
            self.assertTrue(torch.equal(got, part))
        self.assertIsNone(self.s.get_tensor_with_tp("w", tp_rank=2, tp_size=4))
        # tp_size 1 is the plain call on the key itself.
        self.assertEqual(self.s.put_tensor_with_tp("whole", t, tp_size=1), 0)
        self.assertTrue(torch.equal(self.s.get_tensor_with_tp("whole"), t))
        self.assertEqual(self.s.get("whole")[:304], mooncake_header(11, [4, 6]))
        # Only equal shards, along a dimension the tensor has.
        self.assertEqual(self.s.put_tensor_with_tp("odd", t, tp_size=4, split_dim=1), INVALID)
        self.assertEqual(self.s.put_tensor_with_tp("odd", t, tp_size=2, split_dim=2), INVALID)
        self.assertEqual(self.s.put_tensor_with_tp("odd", t, tp_size=2, split_dim=-1), INVALID)
        self.assertEqual(self.s.batch_is_exist(["odd_tp_0", "odd_tp_1", "odd"]), [0, 0, 0])  # nothing written

    def test_batch_tensor_parallel(self):
        a = torch.arange(16, dtype=torch.int64).reshape(4, 4)
        b = torch.arange(8, dtype=torch.bfloat16).reshape(4, 2)
        got = self.s.batch_put_tensor_with_tp(["a", "b", "c", "d"], [a, b, torch.zeros(3, 3), "no"], tp_size=2)
        self.assertEqual(got, [0, 0, INVALID, INVALID])
        self.assertEqual(self.s.batch_is_exist(["c_tp_0", "d_tp_0"]), [0, 0])
        for rank in (0, 1):
            r = self.s.batch_get_tensor_with_tp(["a", "b", "c"], tp_rank=rank, tp_size=2)
            self.assertTrue(torch.equal(r[0], a[2 * rank:2 * rank + 2]))
            self.assertTrue(torch.equal(r[1], b[2 * rank:2 * rank + 2]) and r[1].dtype == torch.bfloat16)
            self.assertIsNone(r[2])
        r = self.s.batch_get_tensor_with_tp_into(["a", "b"], [self.ptr, self.ptr + 4096], [4096, 4096],
                                                 tp_rank=1, tp_size=2)
        self.assertTrue(torch.equal(r[0], a[2:]) and torch.equal(r[1], b[2:]))
        self.assertEqual(self.s.batch_put_tensor_with_tp(["x"], [a, b], tp_size=2), [INVALID])
        self.assertEqual(self.s.batch_put_tensor_with_tp([], [], tp_size=2), [])

    def test_upsert_and_from(self):
        t = torch.arange(6, dtype=torch.int32).reshape(2, 3)
        self.assertEqual(self.s.put_tensor("u", torch.zeros(1)), 0)
        self.assertEqual(self.s.upsert_tensor("u", t), 0)  # replaces
        self.assertTrue(torch.equal(self.s.get_tensor("u"), t))
        self.assertEqual(self.s.batch_upsert_tensor(["u", "v"], [t + 1, t + 2]), [0, 0])
        self.assertTrue(torch.equal(self.s.get_tensor("v"), t + 2))
        self.assertEqual(self.s.upsert_pub_tensor("v", t), 0)
        self.assertEqual(self.s.batch_upsert_pub_tensor(["v"], [t + 3]), [0])
        self.assertTrue(torch.equal(self.s.get_tensor("v"), t + 3))
        # The _from calls take an object as get_tensor_into leaves it.
        obj = mooncake_header(6, [2, 3]) + struct.pack("<6i", *range(6))
        ctypes.memmove(self.ptr, obj, len(obj))
        ctypes.memmove(self.ptr + 4096, b"x" * 400, 400)
        self.assertEqual(self.s.put_tensor_from("f", self.ptr, len(obj)), 0)
        self.assertEqual(self.s.get("f"), obj)
        self.assertEqual(self.s.batch_put_tensor_from(["g", "h"], [self.ptr, self.ptr + 4096], [len(obj), 400]),
                         [0, INVALID])  # h's bytes are no tensor
        self.assertEqual(self.s.put_tensor_from("i", self.ptr, len(obj) - 1), INVALID)  # cut short
        self.assertEqual(self.s.batch_is_exist(["g", "h", "i"]), [1, 0, 0])
        self.assertEqual(self.s.upsert_tensor_from("f", self.ptr, len(obj)), 0)
        self.assertEqual(self.s.batch_upsert_tensor_from(["f"], [self.ptr + 4096], [400]), [INVALID])
        self.assertEqual(self.s.put_tensor_with_tp_from("tp", self.ptr, len(obj), tp_size=3, split_dim=1), 0)
        self.assertTrue(torch.equal(self.s.get_tensor_with_tp("tp", 2, 3), t[:, 2:]))
        self.assertEqual(self.s.batch_put_tensor_with_tp_from(["tq", "tr"], [self.ptr, self.ptr + 4096], [len(obj), 400],
                                                              tp_size=2, split_dim=0), [0, INVALID])
        self.assertTrue(torch.equal(self.s.get_tensor_with_tp("tq", 1, 2), t[1:]))

    def test_pub_tensor(self):
        t = torch.ones(2, 2)
        cfg = ReplicateConfig()
        cfg.preferred_segments = ["seg-a", "seg-b"]  # two segments for one replica
        self.assertEqual(self.s.pub_tensor("p", t, cfg), INVALID)
        self.assertEqual(self.s.batch_pub_tensor(["p"], [t], cfg), [INVALID])
        self.assertEqual(self.s.pub_tensor_with_tp("p", t, cfg, tp_size=2), INVALID)
        self.assertEqual(self.s.is_exist("p"), 0)
        cfg = ReplicateConfig()
        cfg.with_soft_pin = True
        self.assertEqual(self.s.pub_tensor("p", t, cfg), 0)
        self.assertEqual(self.s.batch_pub_tensor_with_tp(["q"], [t], cfg, tp_size=2, split_dim=0), [0])
        self.assertTrue(torch.equal(self.s.get_tensor("p"), t))
        self.assertTrue(torch.equal(self.s.get_tensor_with_tp("q", 1, 2), t[1:]))


if __name__ == "__main__":
    unittest.main()
