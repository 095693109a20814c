"""An SGLang HiCache storage backend (L3) on a yuebing node.

SGLang loads it with no change of its own::

    python -m sglang.launch_server --enable-hierarchical-cache \\
        --hicache-storage-backend dynamic \\
        --hicache-storage-backend-extra-config '{"backend_name": "yuebing",
            "module_path": "yuebing.hicache", "class_name": "YuebingHiCacheStorage",
            "interface_v1": 1, "master_server_address": "127.0.0.1:8080"}'

SGLang's dynamic loader imports ``module_path``, checks that the class
derives from its ``HiCacheStorage`` and calls ``cls(storage_config,
kwargs)``. The node is ``master_server_address`` of the extra config, or
what ``yuebing.mooncake.load_config`` finds (``MOONCAKE_CONFIG_PATH``,
``SGLANG_HICACHE_MOONCAKE_CONFIG_PATH``, ``MOONCAKE_MASTER``).

Pages are stored as SGLang's mooncake backend stores them, so the two read
each other's layout: an MHA page is two objects, ``<key>_<tp_rank>_k`` and
``<key>_<tp_rank>_v`` (each the page's K or V of every layer, as the host
pool's ``get_page_buffer_meta`` gives them); an MLA page is one object,
``<key>__k``. Keys are prefixed with the model's name. The ``_v1`` calls
read and write the registered host pool in place through the node's data
path (shared memory on one host); docs/python.md has the details.
"""

from __future__ import annotations

import threading
import time

try:  # SGLang's base class where SGLang is installed, so its loader accepts the backend
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage  # type: ignore
except ImportError:  # the same interface, for use and tests without SGLang
    from abc import ABC, abstractmethod

    class HiCacheStorage(ABC):  # type: ignore[no-redef]
        """SGLang's HiCacheStorage interface (sglang/srt/mem_cache/hicache_storage.py)."""

        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        def batch_set_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError()

        @abstractmethod
        def get(self, key, target_location=None, target_sizes=None):
            pass

        @abstractmethod
        def batch_get(self, keys, target_locations=None, target_sizes=None):
            pass

        @abstractmethod
        def set(self, key, value=None, target_location=None, target_sizes=None):
            pass

        @abstractmethod
        def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
            pass

        @abstractmethod
        def exists(self, key):
            pass

        def batch_exists(self, keys, extra_info=None):
            for i, k in enumerate(keys):
                if not self.exists(k):
                    return i
            return len(keys)

        def clear(self):
            pass

        def get_stats(self):
            return None

from .mooncake import ErrorCode, MooncakeDistributedStore, load_config


class Stats:
    """What get_stats returns, with the fields of SGLang's StorageMetrics:
    pages per prefetch and backup call and their bandwidth (GB/s), since
    the previous call."""

    def __init__(self):
        self.prefetch_pgs: list[int] = []
        self.backup_pgs: list[int] = []
        self.prefetch_bandwidth: list[float] = []
        self.backup_bandwidth: list[float] = []


class YuebingHiCacheStorage(HiCacheStorage):
    """HiCacheStorage on a yuebing node. Safe for use from SGLang's
    prefetch and backup threads at once."""

    def __init__(self, storage_config=None, kwargs=None):
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        cfg = load_config(extra)
        self.store = MooncakeDistributedStore()
        rc = self.store.setup(cfg)
        if rc != 0:
            raise RuntimeError(f"yuebing HiCache backend: setup against {cfg.get('master_server_address')!r} failed with {rc}")
        self.is_mla = bool(getattr(storage_config, "is_mla_model", False))
        tp_rank = getattr(storage_config, "tp_rank", 0) or 0
        pp_size = getattr(storage_config, "pp_size", 1) or 1
        pp_rank = getattr(storage_config, "pp_rank", 0) or 0
        # SGLang's mooncake backend's suffixes: MLA pages are shared by
        # every TP rank, MHA pages are per rank.
        self.mha_suffix = f"{tp_rank}_{pp_rank}" if pp_size > 1 else f"{tp_rank}"
        self.mla_suffix = f"{pp_rank}" if pp_size > 1 else ""
        model = getattr(storage_config, "model_name", None)
        parts = [str(extra["extra_backend_tag"])] if extra.get("extra_backend_tag") is not None else []
        if model:
            parts.append("-".join(model.split("/")))
        self.prefix = "_".join(parts) + "_" if parts else ""
        self.mem_pool_host = None
        self._stats = Stats()
        self._lock = threading.Lock()

    # -- keys ---------------------------------------------------------------

    def _objects(self, keys) -> list[str]:
        """The store objects of the pages, in the order get_page_buffer_meta
        lists their ranges."""
        if self.is_mla:
            return [f"{self.prefix}{k}_{self.mla_suffix}_k" for k in keys]
        return [f"{self.prefix}{k}_{self.mha_suffix}_{s}" for k in keys for s in ("k", "v")]

    @property
    def _per_page(self) -> int:
        return 1 if self.is_mla else 2

    # -- host pool ------------------------------------------------------------

    def register_mem_pool_host(self, mem_pool_host):
        super().register_mem_pool_host(mem_pool_host)
        buf = mem_pool_host.kv_buffer
        rc = self.store.register_buffer(buf.data_ptr(), buf.numel() * buf.element_size())
        if rc != 0:
            raise RuntimeError(f"register_buffer of the host KV pool: {rc}")

    def _meta(self, keys, host_indices):
        if self.mem_pool_host is None:
            raise RuntimeError("register_mem_pool_host first")
        page = self.mem_pool_host.page_size
        if len(host_indices) != len(keys) * page:
            raise ValueError(f"{len(host_indices)} host indices for {len(keys)} pages of {page}")
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        objs = self._objects(keys)
        if len(ptrs) != len(objs):
            raise ValueError(f"the host pool gave {len(ptrs)} ranges for {len(objs)} objects")
        return objs, list(ptrs), list(sizes)

    def _pages(self, results, sizes, ok) -> list[bool]:
        """Per page: every object of it succeeded."""
        n = self._per_page
        return [all(ok(r, s) for r, s in zip(results[i:i + n], sizes[i:i + n])) for i in range(0, len(results), n)]

    def batch_get_v1(self, keys, host_indices, extra_info=None) -> list[bool]:
        """Reads the pages into the host pool at host_indices; per page,
        True when every byte of it arrived (a page reads all or nothing)."""
        if not keys:
            return []
        objs, ptrs, sizes = self._meta(keys, host_indices)
        t = time.perf_counter()
        got = self.store.batch_get_into(objs, ptrs, sizes)
        out = self._pages(got, sizes, lambda r, s: r == s)
        self._record(self._stats.prefetch_pgs, self._stats.prefetch_bandwidth, sum(out), sizes, t)
        return out

    def batch_set_v1(self, keys, host_indices, extra_info=None) -> list[bool]:
        """Writes the host pool's pages at host_indices; pages already
        stored are not written again (they are immutable)."""
        if not keys:
            return []
        objs, ptrs, sizes = self._meta(keys, host_indices)
        exist = self.store.batch_is_exist(objs)
        todo = [i for i, e in enumerate(exist) if e != 1]
        res = [0] * len(objs)
        t = time.perf_counter()
        if todo:
            put = self.store.batch_put_from([objs[i] for i in todo], [ptrs[i] for i in todo], [sizes[i] for i in todo])
            for i, r in zip(todo, put):
                res[i] = r
        out = self._pages(res, sizes, lambda r, s: r == 0)
        self._record(self._stats.backup_pgs, self._stats.backup_bandwidth, sum(out), [sizes[i] for i in todo], t)
        return out

    def _record(self, pages, bw, n, sizes, t0) -> None:
        dt = time.perf_counter() - t0
        with self._lock:
            pages.append(n)
            bw.append(sum(sizes) / dt / 1e9 if dt > 0 and sizes else 0.0)

    # -- the generic calls ------------------------------------------------------

    def exists(self, key) -> bool:
        return self.batch_exists([key]) == 1

    def batch_exists(self, keys, extra_info=None) -> int:
        """How many pages, from the first, are stored whole (every object
        of each)."""
        if not keys:
            return 0
        ex = self.store.batch_is_exist(self._objects(keys))
        n = self._per_page
        for i in range(len(keys)):
            if any(e != 1 for e in ex[i * n:(i + 1) * n]):
                return i
        return len(keys)

    def get(self, key, target_location=None, target_sizes=None):
        """The object ``key`` (as stored, without page suffixes): read into
        target_location (an address in registered memory, or a tensor)
        and returned as that, or as a new uint8 tensor; None on a miss."""
        return self.batch_get([key], [target_location] if target_location is not None else None,
                              [target_sizes] if target_sizes is not None else None)[0]

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        import torch
        out = []
        for i, k in enumerate(keys):
            name = self.prefix + k
            loc = target_locations[i] if target_locations is not None else None
            if loc is None:
                h = self.store.get_buffer(name)
                out.append(None if h is None else torch.frombuffer(h, dtype=torch.uint8))
                continue
            if isinstance(loc, torch.Tensor):
                ptr, size = loc.data_ptr(), loc.numel() * loc.element_size()
            else:
                ptr, size = int(loc), int(target_sizes[i])
            n = self.store.get_into(name, ptr, size)
            if n == ErrorCode.INVALID_PARAMS and isinstance(loc, torch.Tensor) and loc.is_contiguous():
                # A tensor outside registered memory: read through a copy,
                # which must fit it.
                h = self.store.get_buffer(name)
                if h is not None and 0 < len(h) <= size:
                    loc.view(-1).view(torch.uint8)[:len(h)] = torch.frombuffer(h, dtype=torch.uint8)
                    n = len(h)
            out.append(loc if n > 0 else None)
        return out

    def set(self, key, value=None, target_location=None, target_sizes=None) -> bool:
        return self.batch_set([key], [value] if value is not None else None,
                              [target_location] if target_location is not None else None,
                              [target_sizes] if target_sizes is not None else None)

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None) -> bool:
        """Stores each value (a CPU tensor or bytes) or each registered
        range; True when all are stored."""
        ok = True
        for i, k in enumerate(keys):
            name = self.prefix + k
            if values is not None:
                v = values[i]
                data = v.contiguous().view(-1).view(__import__("torch").uint8).numpy() if hasattr(v, "data_ptr") else v
                rc = self.store.put(name, data)
            else:
                rc = self.store.put_from(name, int(target_locations[i]), int(target_sizes[i]))
            ok = ok and rc == 0
        return ok

    def clear(self) -> None:
        self.store.remove_all()

    def get_stats(self):
        with self._lock:
            s, self._stats = self._stats, Stats()
        return s

    def close(self) -> None:
        self.store.close()
