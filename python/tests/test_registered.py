"""Memory from MooncakeHostMemAllocator on the node's host: the node maps
it and moves blocks straight between its store and the engine's buffer."""

from __future__ import annotations

import ctypes
import unittest

from support import SHM, URL, fresh_namespace, need_server, pattern

from yuebing.mooncake import ErrorCode, MooncakeDistributedStore, MooncakeHostMemAllocator

NOT_FOUND, INVALID = int(ErrorCode.OBJECT_NOT_FOUND), int(ErrorCode.INVALID_PARAMS)


@need_server
@unittest.skipUnless(SHM, "YUEBING_SHM=0: the socket path only")
class RegisteredTest(unittest.TestCase):
    def setUp(self):
        self.s = MooncakeDistributedStore()
        self.assertEqual(self.s.setup({"local_hostname": "localhost", "master_server_address": URL,
                                       "namespace": fresh_namespace(), "shm": True}), 0)
        self.addCleanup(self.s.close)
        self.a = MooncakeHostMemAllocator()
        self.src, self.dst = self.a.alloc(4 << 20), self.a.alloc(4 << 20)
        self.assertTrue(self.src and self.dst)
        self.addCleanup(self.a.free, self.dst)
        self.addCleanup(self.a.free, self.src)
        self.assertEqual(self.s.register_buffer(self.dst, 4 << 20), 0)

    def regions(self) -> int:
        return len(self.s._staging()._regions)

    def test_round_trip_without_staging(self):
        data = pattern(70, 3 << 20)
        ctypes.memmove(self.src + 4096, data, len(data))
        self.assertEqual(self.s.put_from("k", self.src + 4096, len(data)), 0)
        self.assertEqual(self.regions(), 1)  # the node maps the source itself
        self.assertEqual(self.s.get_into("k", self.dst + 100, len(data)), len(data))
        self.assertEqual(self.regions(), 2)
        self.assertEqual(ctypes.string_at(self.dst + 100, len(data)), data)
        self.assertEqual(self.s.get("k"), data)  # stored whole, read back by HTTP
        # Ranged reads and batches go the same way; a miss is a miss.
        ctypes.memset(self.dst, 0, 4 << 20)
        got = self.s.batch_get_into(["k", "none", "k"], [self.dst, self.dst + (3 << 20) + 4096, self.dst + 4096],
                                    [len(data), 4096, 4096])
        self.assertEqual(got, [len(data), NOT_FOUND, INVALID])
        self.assertEqual(ctypes.string_at(self.dst, len(data)), data)
        r = self.s.get_into_ranges([self.dst], [["k"]], [[[0]]], [[[1000]]], [[[5000]]])
        self.assertEqual(r, [[[5000]]])
        self.assertEqual(ctypes.string_at(self.dst, 5000), data[1000:6000])
        self.assertEqual(self.s.batch_put_from(["b1", "b2"], [self.src + 4096, self.src + 8192], [4096, 4096]), [0, 0])
        self.assertEqual(self.s.get("b2"), data[4096:8192])

    def test_bounds(self):
        data = pattern(71, 1 << 20)
        ctypes.memmove(self.src, data, len(data))
        self.assertEqual(self.s.put_from("big", self.src, len(data)), 0)
        # A buffer too small for the object: refused, and nothing written.
        ctypes.memset(self.dst, 0x5A, 8192)
        self.assertEqual(self.s.get_into("big", self.dst, 8192), INVALID)
        self.assertEqual(ctypes.string_at(self.dst, 8192), b"\x5a" * 8192)
        # Past the end of the allocation: not the node's to write.
        self.assertEqual(self.s.get_into("big", self.dst + (4 << 20) - 4096, len(data)), INVALID)
        # A freed buffer is unregistered from the node and refused here.
        p = self.a.alloc(1 << 20)
        self.assertEqual(self.s.put_from("p", self.src, 4096), 0)
        self.assertEqual(self.s.get_into("p", p, 4096), 4096)
        before = self.regions()
        self.assertEqual(self.a.free(p), 0)
        self.assertEqual(self.regions(), before - 1)
        self.assertEqual(self.s.get_into("p", p, 4096), INVALID)
        # The node refuses a range outside a region it maps.
        st = self.s._staging()
        rid = next(iter(st._regions.values()))
        res = st.call({"op": "get", "namespace": self.s._client().namespace,
                       "items": [{"name": "big", "region": rid, "offset": (4 << 20) - 10, "length": 1 << 20}]})
        self.assertEqual(res["results"][0]["status"], "error")
        self.assertIn("outside", res["results"][0]["error"]["message"])
        res = st.call({"op": "get", "namespace": self.s._client().namespace,
                       "items": [{"name": "big", "region": 999, "offset": 0, "length": 16}]})
        self.assertIn("no region 999", res["results"][0]["error"]["message"])


if __name__ == "__main__":
    unittest.main()
