"""The SGLang HiCache backend (yuebing.hicache) on a real node: loaded the
way SGLang's dynamic backend loads it, pages of the MHA and MLA host pool
layouts written and read back in place, the object names SGLang's
mooncake backend uses, and pages that are missing or damaged reported as
failed, never as read."""

from __future__ import annotations

import importlib
import os
import unittest

from support import SHM, URL, fresh_namespace, need_server

try:
    import torch
except ImportError:
    torch = None

PAGE = 16


class Pool:
    """SGLang's host KV pool in the page_first layout: MHA
    [2, size, layers, heads, head_dim] (a page's K and V are one range
    each), MLA [size, layers, 1, kv_lora_rank + rope_dim] (one range)."""

    page_size = PAGE
    layout = "page_first"

    def __init__(self, mla: bool, pages: int = 8, layers: int = 2):
        self.mla = mla
        shape = (pages * PAGE, layers, 1, 576) if mla else (2, pages * PAGE, layers, 4, 32)
        self.kv_buffer = torch.zeros(shape, dtype=torch.bfloat16 if mla else torch.float16)

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        for i in range(0, len(indices), PAGE):
            s = int(indices[i])
            if self.mla:
                page = self.kv_buffer[s:s + PAGE]
                ptrs.append(page.data_ptr())
                sizes.append(page.numel() * page.element_size())
            else:
                for kv in (0, 1):
                    page = self.kv_buffer[kv, s:s + PAGE]
                    ptrs.append(page.data_ptr())
                    sizes.append(page.numel() * page.element_size())
        return ptrs, sizes


class StorageConfig:
    """The fields of SGLang's HiCacheStorageConfig the backend reads."""

    def __init__(self, mla: bool, ns: str, tp_rank: int = 0):
        self.tp_rank, self.tp_size, self.pp_rank, self.pp_size = tp_rank, 2, 0, 1
        self.is_mla_model = mla
        self.model_name = "org/tiny"
        self.extra_config = {"backend_name": "yuebing", "module_path": "yuebing.hicache",
                             "class_name": "YuebingHiCacheStorage", "interface_v1": 1,
                             "master_server_address": URL, "namespace": ns, "shm": "auto" if SHM else False}


def load_dynamic(storage_config):
    """SGLang's StorageBackendFactory._create_dynamic_backend, step by step."""
    from yuebing.hicache import HiCacheStorage
    extra = storage_config.extra_config
    cls = getattr(importlib.import_module(extra["module_path"]), extra["class_name"])
    if not issubclass(cls, HiCacheStorage):
        raise TypeError(f"{cls} must inherit from HiCacheStorage")
    return cls(storage_config, {})


@unittest.skipIf(torch is None, "torch is not importable: apt-get install python3-torch python3-numpy")
@need_server
class HiCacheTest(unittest.TestCase):
    def _backend(self, mla, ns, tp_rank=0):
        b = load_dynamic(StorageConfig(mla, ns, tp_rank))
        self.addCleanup(b.close)
        pool = Pool(mla)
        b.register_mem_pool_host(pool)
        return b, pool

    def _round_trip(self, mla):
        ns = fresh_namespace()
        w, wp = self._backend(mla, ns)
        r, rp = self._backend(mla, ns)
        g = torch.Generator().manual_seed(3)
        wp.kv_buffer.copy_(torch.randn(wp.kv_buffer.shape, generator=g).to(wp.kv_buffer.dtype))
        keys = [f"page{i}" for i in range(5)]
        idx = torch.arange(5 * PAGE)
        self.assertEqual(r.batch_exists(keys), 0)
        self.assertEqual(w.batch_set_v1(keys[:3], idx[:3 * PAGE]), [True] * 3)
        self.assertEqual(r.batch_exists(keys), 3)  # the hit prefix
        self.assertTrue(r.exists("page1") and not r.exists("page3"))
        # Pages already stored are not written again; new ones are.
        self.assertEqual(w.batch_set_v1(keys, idx), [True] * 5)
        self.assertEqual(r.batch_exists(keys), 5)
        self.assertEqual(r.batch_get_v1(keys, idx), [True] * 5)
        used = (slice(None), slice(0, 5 * PAGE)) if not mla else (slice(0, 5 * PAGE),)
        self.assertTrue(torch.equal(rp.kv_buffer[used], wp.kv_buffer[used]))
        self.assertFalse(torch.equal(rp.kv_buffer, wp.kv_buffer))  # the pages past them were never read
        return w, r, rp, keys, idx

    def test_mha(self):
        w, r, rp, keys, idx = self._round_trip(False)
        # SGLang's mooncake backend's names: per TP rank, K and V apart.
        st = w.store
        self.assertEqual(st.batch_is_exist(["org-tiny_page0_0_k", "org-tiny_page0_0_v", "org-tiny_page0_1_k"]), [1, 1, 0])
        # Another TP rank has pages of its own.
        other, _ = self._backend(False, w.store._client()._ns(None), tp_rank=1)
        self.assertEqual(other.batch_exists(keys), 0)
        # A page missing its V object is a miss, and a failed read.
        self.assertEqual(st.remove("org-tiny_page2_0_v"), 0)
        self.assertEqual(r.batch_exists(keys), 2)
        rp.kv_buffer.zero_()
        self.assertEqual(r.batch_get_v1(keys, idx), [True, True, False, True, True])
        stats = r.get_stats()
        self.assertEqual(stats.prefetch_pgs[-1], 4)
        self.assertEqual(r.get_stats().prefetch_pgs, [])  # since the last call

    def test_mla(self):
        w, r, rp, keys, idx = self._round_trip(True)
        st = w.store
        # One object per page, shared by the TP ranks.
        self.assertEqual(st.batch_is_exist(["org-tiny_page0__k", "org-tiny_page0_0_k"]), [1, 0])
        other, op = self._backend(True, w.store._client()._ns(None), tp_rank=1)
        self.assertEqual(other.batch_exists(keys), 5)
        # A page stored short (another writer's, or damaged) is refused
        # whole: the pool's page is not reported read.
        self.assertEqual(st.upsert("org-tiny_page1__k", b"short"), 0)
        self.assertEqual(other.batch_get_v1(keys, idx), [True, False, True, True, True])

    def test_generic_calls_and_bad_input(self):
        ns = fresh_namespace()
        b, pool = self._backend(False, ns)
        t = torch.arange(100, dtype=torch.int32)
        self.assertTrue(b.set("obj", t))
        self.assertTrue(torch.equal(b.get("obj").view(torch.int32), t))
        into = torch.zeros(100, dtype=torch.int32)
        self.assertIs(b.get("obj", into), into)
        self.assertTrue(torch.equal(into, t))
        self.assertEqual(b.batch_get(["obj", "none"])[1], None)
        self.assertTrue(b.batch_set(["a", "b"], [t, t + 1]))
        with self.assertRaises(ValueError):
            b.batch_get_v1(["p0", "p1"], torch.arange(PAGE))  # indices for one page, keys for two
        self.assertEqual(b.batch_get_v1([], torch.arange(0)), [])
        b.clear()
        self.assertIsNone(b.get("obj"))
        bad = StorageConfig(False, ns)
        bad.extra_config["master_server_address"] = "127.0.0.1:1"
        with self.assertRaises(RuntimeError):
            load_dynamic(bad)


if __name__ == "__main__":
    unittest.main()
