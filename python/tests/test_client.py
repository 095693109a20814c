"""The native client against a real node."""

from __future__ import annotations

import json
import os
import unittest
import urllib.request

from support import URL, SHM, client, fresh_namespace, need_server, pattern

import yuebing


@need_server
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.c = client()
        self.addCleanup(self.c.close)

    def test_data_path(self):
        self.assertEqual(self.c.shm, SHM)

    def test_put_get_delete(self):
        data = pattern(1, 300_000)
        it = self.c.put("obj/one", data)
        self.assertEqual((it.status, it.size, it.key), ("created", len(data), yuebing.opaque_key(self.c.namespace, "obj/one")))
        self.assertEqual(self.c.put("obj/one", data).status, "exists")
        self.assertEqual(self.c.get("obj/one"), data)
        self.assertEqual(self.c.size("obj/one"), len(data))
        self.assertTrue(self.c.exists("obj/one"))
        self.assertTrue(self.c.delete("obj/one"))
        self.assertFalse(self.c.delete("obj/one"))
        self.assertFalse(self.c.exists("obj/one"))
        with self.assertRaises(yuebing.NotFound) as e:
            self.c.get("obj/one")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        with self.assertRaises(yuebing.NotFound):
            self.c.size("obj/one")

    def test_get_into(self):
        data = pattern(2, 1 << 20)
        self.c.put("big", memoryview(data))
        buf = bytearray(2 << 20)
        self.assertEqual(self.c.get_into("big", buf), len(data))
        self.assertEqual(buf[:len(data)], data)
        part = bytearray(1000)
        self.assertEqual(self.c.get_into("big", part, offset=12345), 1000)
        self.assertEqual(part, data[12345:13345])
        with self.assertRaises(yuebing.TooLarge):
            self.c.get_into("big", bytearray(10))
        with self.assertRaises(yuebing.BadRequest):
            self.c.get_into("big", bytearray(10), offset=len(data) - 5)
        with self.assertRaises(yuebing.NotFound):
            self.c.get_into("missing", bytearray(10))
        with self.assertRaises(yuebing.BadRequest):
            self.c.get_into("big", memoryview(bytes(10)))  # read-only

    def test_blocks_by_key(self):
        keys = self.c.keys(range(512), block_size=256)
        self.assertEqual(len(keys), 2)
        self.c.put_many(keys=keys, values=[b"first", b"second"])
        self.assertEqual(self.c.get(None, key=keys[1]), b"second")
        self.assertEqual(self.c.get(None, key=keys[0].hex()), b"first")
        self.assertEqual(self.c.exists_many(keys=keys), [True, True])
        self.assertEqual(self.c.delete_many(keys=keys[:1]), [True])
        self.assertFalse(self.c.exists(None, key=keys[0]))
        with self.assertRaises(ValueError):
            self.c.get(None, key="abc")
        # A key in hex puts as its bytes do, on either data path.
        self.assertEqual(self.c.put(None, b"again", key=keys[0].hex()).status, "created")
        self.assertEqual(self.c.get(None, key=keys[0]), b"again")
        with self.assertRaises(ValueError):
            self.c.put(None, b"x", key="abc")

    def test_keys_match_the_server(self):
        tokens = list(range(1000, 1000 + 600))
        req = urllib.request.Request(URL + "/v1/keys", data=json.dumps(
            {"namespace": self.c.namespace, "block_size": 128, "tokens": tokens}).encode(), method="POST")
        with urllib.request.urlopen(req) as r:
            want = [bytes.fromhex(k) for k in json.load(r)["keys"]]
        self.assertEqual(self.c.keys(tokens, block_size=128), want)
        with self.assertRaises(ValueError):
            self.c.keys([1, 2, -1], block_size=16)
        with self.assertRaises(ValueError):
            self.c.keys([1], block_size=8)

    def test_lookup(self):
        tokens = list(range(16 * 5 + 3))
        ks = self.c.keys(tokens, block_size=16)
        self.c.put_many(keys=ks[:3], values=[b"a", b"b", b"c"])
        self.c.put(None, b"e", key=ks[4])
        m = self.c.lookup(tokens, block_size=16)
        self.assertEqual((m.prefix_len, m.prefix_tokens, len(m.keys)), (3, 48, 5))
        self.assertEqual(m.tiers, ["dram", "dram", "dram", "", "dram"])
        self.assertEqual(self.c.lookup(tokens[:10], block_size=16).prefix_len, 0)

    def test_batches(self):
        names = [f"n{i}" for i in range(5)]
        vals = [pattern(i, 100 * i + 1) for i in range(5)]
        items = self.c.put_many(names, vals)
        self.assertEqual([i.status for i in items], ["created"] * 5)
        self.assertEqual(self.c.get_many(names + ["missing"]), vals + [None])
        self.assertEqual(self.c.exists_many(["n0", "missing"]), [True, False])
        bufs = [bytearray(500) for _ in range(6)]
        got = self.c.get_many_into(names + ["missing"], bufs)
        self.assertEqual([g.size for g in got[:5]], [len(v) for v in vals])
        for b, v in zip(bufs, vals):
            self.assertEqual(bytes(b[:len(v)]), v)
        self.assertEqual(got[5].status, "missing")
        self.assertFalse(got[5].ok)
        small = self.c.get_many_into(["n4"], [bytearray(3)])
        self.assertIsInstance(small[0].error, yuebing.TooLarge)
        with self.assertRaises(yuebing.BadRequest):
            self.c.put_many(["a", "b"], [b"x"])
        with self.assertRaises(yuebing.BadRequest):
            self.c.get_many_into(["a"], [])
        self.assertEqual(self.c.delete_many(names[:2] + ["missing"]), [True, True, False])
        self.assertEqual(self.c.get_many([]), [])

    def test_contexts(self):
        self.c.put("sys", b"system prompt")
        ctx = self.c.create_context(60, names=["sys", "later"], name="chat")
        self.assertEqual(ctx["resident"], {"dram": 1, "ssd": 0})
        self.assertEqual(ctx["missing"], 1)
        self.assertEqual(self.c.get_context(ctx["id"])["name"], "chat")
        self.assertIn(self.c.extend_context(ctx["id"], 120)["ttl_seconds"], range(100, 121))
        self.assertIn(ctx["id"], [x["id"] for x in self.c.list_contexts()])
        self.c.delete_context(ctx["id"])
        with self.assertRaises(yuebing.NotFound):
            self.c.get_context(ctx["id"])
        with self.assertRaises(yuebing.BadRequest):
            self.c.create_context(0, names=["sys"])
        with self.assertRaises(yuebing.BadRequest):
            self.c.create_context(10)

    def test_bad_arguments(self):
        with self.assertRaises(yuebing.BadRequest) as e:
            self.c.put("x", b"1", namespace="no-slash")
        self.assertEqual(e.exception.code, "invalid_namespace")
        with self.assertRaises(yuebing.BadRequest):
            self.c.put("", b"1")
        with self.assertRaises(yuebing.BadRequest):
            self.c.put("x" * 300, b"1")
        with self.assertRaises(yuebing.BadRequest):
            self.c.put("x", b"1", replicas=2)  # a node alone
        with self.assertRaises(ValueError):
            yuebing.Client("ftp://x")

    def test_retention(self):
        self.assertEqual(self.c.put("r", b"1", retention="low", retention_ttl=60).status, "created")
        self.assertEqual(self.c.put_many(keys=[os.urandom(32)], values=[b"2"], retention="high", retention_ttl=5)[0].status,
                         "created")
        self.assertEqual(self.c.put("r", b"other", retention="normal").status, "exists")  # the class changes
        for kw in ({"retention": "forever"}, {"retention_ttl": 5}, {"retention": "high", "retention_ttl": 0},
                   {"retention": "high", "retention_ttl": True}):
            with self.assertRaises(yuebing.BadRequest, msg=kw):
                self.c.put("bad", b"1", **kw)
        self.assertFalse(self.c.exists("bad"))

    def test_clear_regex(self):
        self.c.put_many(["l0_a", "l0_b", "l1_a"], [b"1", b"2", b"3"])
        with self.assertRaises(yuebing.BadRequest):
            self.c.clear(regex="(")
        self.assertEqual(self.c.clear(regex="^l0_"), 2)
        self.assertEqual(self.c.exists_many(["l0_a", "l0_b", "l1_a"]), [False, False, True])

    def test_clear(self):
        self.c.put_many(["a", "b", "c"], [b"1", b"2", b"3"])
        other = client()
        self.addCleanup(other.close)
        other.put("a", b"keep")
        self.assertEqual(self.c.clear(), 3)
        self.assertEqual(self.c.get_many(["a", "b", "c"]), [None, None, None])
        self.assertEqual(other.get("a"), b"keep")

    @unittest.skipUnless(SHM, "shared memory only")
    def test_broken_session_falls_back_to_the_socket(self):
        data = pattern(5, 100_000)
        self.c.put("fb", data)
        import socket
        self.c._shm.sock.shutdown(socket.SHUT_RDWR)  # as if the node had gone away
        buf = bytearray(200_000)
        self.assertEqual(self.c.get_into("fb", buf), len(data))
        self.assertEqual(buf[:len(data)], data)
        self.assertFalse(self.c.shm)
        self.assertEqual(self.c.put("fb2", memoryview(data)).status, "created")
        self.assertEqual(self.c.get("fb2"), data)

    def test_unreachable(self):
        with self.assertRaises(yuebing.ConnectionFailed):
            yuebing.Client("http://127.0.0.1:1", shm=False).get("x")
        self.assertTrue(self.c.healthy())
        self.assertIn("blocks", json.dumps(self.c.stats()))


if __name__ == "__main__":
    unittest.main()
