"""Chain parents from the Python client: a node with ``ssd.admission:
chain`` demotes a chain's interior blocks to SSD when DRAM evicts them and
refuses its tail, whichever path the puts took (shared memory or frames on
the socket), as server/admission_test.go checks for the Go client."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import unittest

from support import SHM, Node, fresh_namespace, need_binary, pattern

import yuebing
from yuebing.errors import BadRequest

BLOCK = 64 << 10


@need_binary
@unittest.skipUnless(SHM, "YUEBING_SHM=0: the shared-memory run checks both paths on nodes of its own")
class ParentTest(unittest.TestCase):
    def client(self, shm: bool) -> yuebing.Client:
        """A client of a node of its own: blocks another check's filler
        left being demoted would compete with this one's for DRAM."""
        d = tempfile.mkdtemp(prefix="yuebing-parent-")
        self.addCleanup(shutil.rmtree, d, True)
        # 8 MiB of DRAM, which 160 filler blocks of 64 KiB overrun.
        node = Node("parent", os.path.join(d, "data"), ["--dram-capacity", "8MiB"],
                    env={"YUEBING_SSD_ADMISSION": "chain"})
        self.addCleanup(node.kill)
        c = yuebing.Client(node.url, namespace=fresh_namespace(), shm=shm)
        self.addCleanup(c.close)
        self.assertEqual(c.shm, shm)
        return c

    @staticmethod
    def chains(c: yuebing.Client, seeds, n: int = 3):
        """Chains of n keys each, interleaved as a save batch mixes
        several requests: (keys, parents, tails) in batch order."""
        chains = [c.keys(list(range(s * 10_000, s * 10_000 + n * 16)), block_size=16) for s in seeds]
        keys, parents, tails = [], [], []
        for i in range(n):
            for ks in chains:
                keys.append(ks[i])
                parents.append(ks[i - 1] if i > 0 else None)
                tails.append(i == n - 1)
        return keys, parents, tails

    def evicted(self, c: yuebing.Client, keys) -> list[str]:
        """Puts blocks nobody chains through DRAM until keys have left it,
        then returns where each is once the demotions settle: "ssd", or ""
        for refused (no tier holds it)."""
        self.assertEqual(self.where(c, keys), ["dram"] * len(keys), "every block put in DRAM")
        filler = pattern(99, BLOCK)
        c.put_many([f"filler-{i}" for i in range(160)], [filler] * 160)
        deadline = time.monotonic() + 10
        while True:
            tiers = self.where(c, keys)
            if "dram" not in tiers or time.monotonic() > deadline:
                return tiers
            time.sleep(0.02)

    @staticmethod
    def where(c: yuebing.Client, keys) -> list[str]:
        res = c._json("POST", "/v1/batch/exists", {"namespace": c.namespace, "keys": [k.hex() for k in keys]})
        return list(res["tiers"])

    def check(self, c: yuebing.Client, keys, tails) -> None:
        want = ["" if t else "ssd" for t in tails]
        self.assertEqual(self.evicted(c, keys), want, "interior blocks on SSD, the tails refused")

    def test_put_many_parents(self):
        for shm in (True, False):
            with self.subTest(shm=shm):
                c = self.client(shm)
                keys, parents, tails = self.chains(c, (1, 2))
                vals = [pattern(i, BLOCK) for i in range(len(keys))]
                items = c.put_many(keys=keys, values=vals, parents=parents)
                self.assertEqual([it.status for it in items], ["created"] * len(keys))
                self.check(c, keys, tails)
                self.assertEqual(c.get(None, key=keys[0]), vals[0])  # read back from SSD

    def test_put_parent(self):
        for shm in (True, False):
            with self.subTest(shm=shm):
                c = self.client(shm)
                keys, parents, tails = self.chains(c, (3, 4))
                for i, (k, p) in enumerate(zip(keys, parents)):
                    self.assertEqual(c.put(None, pattern(i, BLOCK), key=k, parent=p).status, "created")
                self.check(c, keys, tails)

    def test_chain_over_shared_memory(self):
        # chain=True names each key's parent itself on shared memory,
        # which has no chain flag; a parent given wins.
        c = self.client(True)
        keys, _, _ = self.chains(c, (5,), n=4)
        other, _, _ = self.chains(c, (6,), n=1)
        vals = [pattern(i, BLOCK) for i in range(5)]
        c.put_many(keys=keys + other, values=vals, chain=True, parents=[None] * 4 + [keys[1]])
        # keys[1] has two children and other[0] none: only the tails refused.
        self.check(c, keys + other, [False, False, False, True, True])

    def test_bad_parent(self):
        for shm in (True, False):
            with self.subTest(shm=shm):
                c = self.client(shm)
                keys, _, _ = self.chains(c, (7,), n=2)
                for bad in ("abc", "0" * 66, "G" * 64, b"short"):
                    with self.assertRaisesRegex(BadRequest, r"parents\[1\]"):
                        c.put_many(keys=keys, values=[b"a", b"b"], parents=[None, bad])
                    with self.assertRaisesRegex(BadRequest, "parent"):
                        c.put(None, b"a", key=keys[0], parent=bad)
                with self.assertRaisesRegex(BadRequest, "1 parents"):
                    c.put_many(keys=keys, values=[b"a", b"b"], parents=[None])
                with self.assertRaisesRegex(BadRequest, "need keys"):
                    c.put_many(["a"], [b"a"], parents=[None])
                self.assertEqual(c.exists_many(keys=keys), [False, False], "nothing of a refused put stored")

    def test_node_refuses_bad_parent(self):
        # What the node answers an item whose parent is not a key, were
        # one sent: the session's call raises BadRequest naming it.
        c = self.client(True)
        keys, _, _ = self.chains(c, (8,), n=1)
        st = c._usable_shm()
        with self.assertRaisesRegex(BadRequest, r"items\[0\]\.parent"):
            st.call({"op": "put", "namespace": c.namespace,
                     "items": [{"key": keys[0].hex(), "offset": 0, "length": 5, "parent": "abc"}]})
        self.assertFalse(c.exists(None, key=keys[0]))


if __name__ == "__main__":
    unittest.main()
