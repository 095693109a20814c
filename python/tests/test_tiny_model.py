"""The tiny real model's KV through yuebing: 200 prompts sharing prefixes,
their prefix KV saved to a node and loaded back, through the
``mooncake.store`` drop-in (as vLLM's connector calls it) and through the
SGLang HiCache backend.

- Loaded from the pool, the next-token logits equal (torch.equal) those of
  the same engine computing with the prefix KV kept in its own memory, with
  the same chunking (prefix blocks, then the rest in one chunk).
- They match a from-scratch recompute (the whole prompt in one chunk)
  within ATOL/RTOL: float32 sums in another order differ in the last bits.
- A block damaged in the pool is detected and never attended to.

YUEBING_URL names the node; YUEBING_PEER_URL, when set, a second node of
the same cluster: blocks are saved through one and loaded through the
other. Skips where torch is absent."""

from __future__ import annotations

import os
import random
import sys
import time
import unittest

from support import SHM, URL, fresh_namespace, need_server

try:
    import torch
except ImportError:
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mooncake-compat"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "tiny_model"))

PEER = os.environ.get("YUEBING_PEER_URL", "")
PROMPTS = int(os.environ.get("YUEBING_TINY_PROMPTS", "200"))
# From-scratch recompute vs a cached prefix: the same math in float32, with
# the prefix's matmuls over a shorter chunk; measured differences are
# below 1e-5 on logits of magnitude ~1-10.
ATOL, RTOL = 1e-4, 1e-4


def _prompts(n: int, seed: int = 7):
    """n prompts over n//10 shared prefixes (17-112 tokens: most end mid
    block) with suffixes of 1-16 tokens of their own."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(512) for _ in range(rng.randrange(17, 113))] for _ in range(max(1, n // 10))]
    out = []
    for i in range(n):
        p = prefixes[i % len(prefixes)]
        out.append((i % len(prefixes), p + [rng.randrange(512) for _ in range(rng.randrange(1, 17))]))
    return prefixes, out


@unittest.skipIf(torch is None, "torch is not importable: apt-get install python3-torch python3-numpy")
@need_server
class TinyModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # One thread: on a shared CI machine, OpenMP's threads spinning for
        # cores the other jobs hold made a prefill 13x slower than one.
        torch.set_num_threads(1)
        from model import TinyModel
        from engine import Engine
        cls.model = TinyModel()
        cls.Engine = Engine
        cls.prefixes, cls.prompts = _prompts(PROMPTS)
        # In-engine: the prefixes computed once and kept in the engine's
        # own blocks; each prompt then reuses them.
        local = Engine(cls.model, 256)
        for p in cls.prefixes:
            local.prefill(p, keep=True)
        cls.local = local
        cls.want, cls.hits = [], []
        for _, toks in cls.prompts:
            logits, hit = local.prefill(toks)
            cls.want.append(logits)
            cls.hits.append(hit)
        scratch = Engine(cls.model, 16)
        cls.scratch = [scratch.prefill(toks, use_local=False)[0] for _, toks in cls.prompts]

    def test_in_engine_matches_recompute(self):
        self.assertGreater(sum(self.hits), len(self.prompts))  # most prompts reuse blocks
        for i, (a, b) in enumerate(zip(self.want, self.scratch)):
            self.assertTrue(torch.allclose(a, b, atol=ATOL, rtol=RTOL), f"prompt {i}: max diff {(a - b).abs().max()}")

    def _store(self, url: str, ns: str):
        from mooncake.store import MooncakeDistributedStore
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup({"master_server_address": url, "namespace": ns, "local_hostname": "tiny",
                                  "shm": "auto" if SHM else False}), 0)
        self.addCleanup(s.close)
        return s

    def _check_pool(self, save_engine, load_engine, conn):
        from model import block_hashes
        for p in self.prefixes:
            save_engine.prefill(p, save=True)
        if PEER:
            # A batch existence check on another node answers from the
            # cluster's index, which hears of new blocks within a report
            # interval (a read is read-your-writes at once): wait for it.
            deadline = time.monotonic() + 20
            for p in self.prefixes:
                hs = block_hashes(p, self.model.cfg.block_size)
                while load_engine.connector.lookup(hs) < len(hs):
                    self.assertLess(time.monotonic(), deadline, "the peer never saw the saved blocks")
                    time.sleep(0.05)
        for i, (_, toks) in enumerate(self.prompts):
            logits, hit = load_engine.prefill(toks)
            self.assertEqual(hit, self.hits[i], f"prompt {i}")
            self.assertTrue(torch.equal(logits, self.want[i]), f"prompt {i}: max diff {(logits - self.want[i]).abs().max()}")
            self.assertTrue(torch.allclose(logits, self.scratch[i], atol=ATOL, rtol=RTOL))
        self.assertEqual(conn.rejected if hasattr(conn, "rejected") else 0, 0)

    def test_mooncake_store_connector(self):
        from engine import MooncakeStoreConnector
        ns = fresh_namespace()
        conns = {}

        def factory(url, name):
            def f(engine):
                conns[name] = MooncakeStoreConnector(engine, self._store(url, ns))
                return conns[name]
            return f
        saver = self.Engine(self.model, 64, factory(URL, "save"))
        loader = self.Engine(self.model, 64, factory(PEER or URL, "load"))
        self._check_pool(saver, loader, conns["load"])

        # A damaged block: one bit of its K in layer 2 flipped in the pool.
        idx = next(i for i, h in enumerate(self.hits) if h >= 3)
        toks = self.prompts[idx][1]
        from model import block_hashes
        key = conns["load"].key(block_hashes(toks, 16)[1])
        st = conns["load"].store  # the damaged copy sits on the node the loader reads
        data = bytearray(st.get(key))
        self.assertGreater(len(data), 0)
        data[len(data) // 2 + 1234] ^= 0x10
        self.assertEqual(st.upsert(key, bytes(data)), 0)
        logits, hit = loader.prefill(toks)
        self.assertEqual(hit, 1)  # the hit ends before the damaged block
        self.assertEqual(conns["load"].rejected, 1)
        exact, h1 = self.local.prefill(toks, max_hit=1)
        self.assertEqual(h1, 1)
        self.assertTrue(torch.equal(logits, exact))
        self.assertTrue(torch.allclose(logits, self.scratch[idx], atol=ATOL, rtol=RTOL))
        # A block cut short reads as a miss too, never as a whole block.
        self.assertEqual(st.upsert(key, bytes(data[:1000])), 0)
        logits, hit = loader.prefill(toks)
        self.assertEqual(hit, 1)
        self.assertTrue(torch.equal(logits, exact))

    def test_hicache_backend(self):
        from engine import HiCacheConnector
        from yuebing.hicache import YuebingHiCacheStorage

        class StorageConfig:  # SGLang's HiCacheStorageConfig's fields the backend reads
            tp_rank, tp_size, pp_rank, pp_size, is_mla_model = 0, 1, 0, 1, False
            model_name = "tiny/model"

        ns = fresh_namespace()

        def factory(url):
            def f(engine):
                sc = StorageConfig()
                sc.extra_config = {"master_server_address": url, "namespace": ns, "shm": "auto" if SHM else False}
                backend = YuebingHiCacheStorage(sc, {})
                self.addCleanup(backend.close)
                return HiCacheConnector(engine, backend)
            return f
        saver = self.Engine(self.model, 64, factory(URL))
        loader = self.Engine(self.model, 64, factory(PEER or URL))
        self._check_pool(saver, loader, loader.connector)
        stats = loader.connector.backend.get_stats()
        self.assertGreater(sum(stats.prefetch_pgs), 0)


    def test_ttft_bench(self):
        import contextlib
        import io
        import json
        import bench
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(bench.main(["--url", URL, "--json", "--repeat", "1", "--prompt", "200", "--cached", "176",
                                         "--namespace", fresh_namespace()]), 0)
        rows = {r["mode"]: r for r in json.loads(out.getvalue())["results"]}
        self.assertEqual(set(rows), {"recompute", "pool"})
        for r in rows.values():
            self.assertEqual(r["name"], "tiny_model")
            self.assertGreater(r["ttft_s"], 0)
        self.assertEqual((rows["pool"]["cached_tokens"], rows["pool"]["baseline"]), (176, "recompute"))
        self.assertAlmostEqual(rows["pool"]["ratio"], rows["recompute"]["ttft_s"] / rows["pool"]["ttft_s"], delta=0.05)


if __name__ == "__main__":
    unittest.main()
