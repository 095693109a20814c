"""A minimal serving engine around the tiny model: a block allocator, an
in-engine prefix cache (vLLM's automatic prefix caching: full blocks kept
by hash), and a KV connector that finds, loads and saves prefix blocks in
an external pool. Two connectors, each written against the interface the
real engines use:

- ``MooncakeStoreConnector`` calls ``mooncake.store`` as vLLM's
  MooncakeStoreConnector does: it registers the paged KV tensors with
  ``register_buffer``, names a block ``<model>@tp_rank:<r>@pcp0@dcp0@pp_rank:0@<hash>``,
  asks ``batch_is_exist`` for the cached prefix, and moves each block as
  one object gathered from (and scattered to) its K and V slices in every
  layer with ``batch_put_from_multi_buffers`` / ``batch_get_into_multi_buffers``.
- ``HiCacheConnector`` goes through an SGLang HiCache storage backend
  (``yuebing.hicache.YuebingHiCacheStorage``): blocks are staged in a host
  KV pool laid out page first, as SGLang's host pool is, and the backend's
  ``batch_exists`` / ``batch_set_v1`` / ``batch_get_v1`` move pages between
  that pool and the node.

A block that comes back damaged must never be attended to: the
mooncake.store connector appends a 16-byte trailer to each object (CRC-32
of the block's KV and a marker) and a block whose bytes do not match it,
or whose size is wrong, ends the hit there; the engine computes the rest.
"""

from __future__ import annotations

import zlib

import torch

from model import Config, TinyModel, block_hashes

# Marks a trailer written by this connector (and its layout version).
_TRAILER_MAGIC = 0x7974696E796B7631  # "ytinykv1"


class Engine:
    """Serves one prompt at a time: prefill only, which is what a prefix
    cache changes. Not safe for concurrent use."""

    def __init__(self, model: TinyModel, num_blocks: int, connector_factory=None):
        self.model = model
        self.cfg: Config = model.cfg
        self.kv = model.new_kv_caches(num_blocks)
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))
        self.local: dict[bytes, int] = {}  # block hash -> block id, the in-engine prefix cache
        self.connector = connector_factory(self) if connector_factory else None

    def _alloc(self, n: int) -> list[int]:
        if n > len(self._free):
            raise MemoryError(f"{n} blocks wanted, {len(self._free)} free")
        return [self._free.pop() for _ in range(n)]

    def _release(self, blocks) -> None:
        self._free.extend(reversed(list(blocks)))

    def prefill(self, tokens, *, use_local=True, use_pool=True, keep=False, save=False, max_hit=None):
        """The logits after tokens, and how many prefix blocks came from a
        cache (in-engine first, then the pool). keep puts the prompt's new
        full blocks in the in-engine cache; save writes them to the pool.
        The last token is always computed, so at most (len-1)//block_size
        blocks are hits; max_hit lowers that."""
        bs = self.cfg.block_size
        hashes = block_hashes(tokens, bs)
        usable = (len(tokens) - 1) // bs
        if max_hit is not None:
            usable = min(usable, max_hit)
        table: list[int] = []
        hit = 0
        while use_local and hit < usable and hashes[hit] in self.local:
            table.append(self.local[hashes[hit]])
            hit += 1
        loaded: list[int] = []
        if use_pool and self.connector is not None and hit < usable:
            n = self.connector.lookup(hashes[hit:usable])
            if n > 0:
                blocks = self._alloc(n)
                got = self.connector.load(hashes[hit:hit + n], blocks)
                # Blocks past the first bad one are never attended to.
                self._release(blocks[got:])
                loaded = blocks[:got]
                table += loaded
                hit += got
        fresh = self._alloc(-(-len(tokens) // bs) - len(table))
        table += fresh
        try:
            logits = self.model.forward(tokens[hit * bs:], hit * bs, self.kv, table)
        except BaseException:
            self._release(loaded + fresh)
            raise
        full = len(hashes)
        if save and self.connector is not None and full > hit:
            self.connector.save(hashes[hit:full], table[hit:full])
        kept = set()
        if keep:
            for i in range(hit, full):
                if hashes[i] not in self.local:
                    self.local[hashes[i]] = table[i]
                    kept.add(table[i])
            for i, b in enumerate(table[:hit]):
                if b in loaded and hashes[i] not in self.local:
                    self.local[hashes[i]] = b
                    kept.add(b)
        self._release([b for b in loaded + fresh if b not in kept])
        return logits, hit


class MooncakeStoreConnector:
    """KV blocks to and from ``mooncake.store`` as vLLM's connector moves
    them (see the module's doc). ``rejected`` counts blocks refused on load
    for a wrong size or checksum."""

    def __init__(self, engine: Engine, store, model_name: str = "tiny-model", tp_rank: int = 0):
        self.engine = engine
        self.store = store
        self.prefix = f"{model_name}@tp_rank:{tp_rank}@pcp0@dcp0@pp_rank:0@"
        self.rejected = 0
        # One trailer slot per block: CRC-32 of the block's KV, then the magic.
        self.trailers = torch.zeros(engine.num_blocks, 2, dtype=torch.int64)
        for t in engine.kv + [self.trailers]:
            rc = store.register_buffer(t.data_ptr(), t.numel() * t.element_size())
            if rc != 0:
                raise RuntimeError(f"register_buffer: {rc}")

    def key(self, h: bytes) -> str:
        return self.prefix + h.hex()

    def _slices(self, b: int) -> list[torch.Tensor]:
        return [kv[i, b] for kv in self.engine.kv for i in (0, 1)]

    def _ranges(self, b: int):
        sl = self._slices(b)
        ptrs = [s.data_ptr() for s in sl] + [self.trailers[b].data_ptr()]
        sizes = [s.numel() * s.element_size() for s in sl] + [16]
        return ptrs, sizes

    def _crc(self, b: int) -> int:
        c = 0
        for s in self._slices(b):
            c = zlib.crc32(s.numpy(), c)
        return c

    def lookup(self, hashes) -> int:
        """How many of the blocks, from the first, the pool holds."""
        n = 0
        for r in self.store.batch_is_exist([self.key(h) for h in hashes]):
            if r != 1:
                break
            n += 1
        return n

    def save(self, hashes, blocks) -> list[int]:
        for b in blocks:
            self.trailers[b, 0] = self._crc(b)
            self.trailers[b, 1] = _TRAILER_MAGIC
        ptrs, sizes = zip(*(self._ranges(b) for b in blocks))
        return self.store.batch_put_from_multi_buffers([self.key(h) for h in hashes], list(ptrs), list(sizes))

    def load(self, hashes, blocks) -> int:
        """Loads the blocks in order; returns how many, from the first,
        arrived whole and matching their trailer."""
        keys = [self.key(h) for h in hashes]
        ptrs, sizes = zip(*(self._ranges(b) for b in blocks))
        want = sum(sizes[0])
        got = self.store.batch_get_into_multi_buffers(keys, list(ptrs), list(sizes))
        for i, (b, n) in enumerate(zip(blocks, got)):
            if n != want or int(self.trailers[b, 1]) != _TRAILER_MAGIC or int(self.trailers[b, 0]) != self._crc(b):
                if n > 0:
                    self.rejected += 1
                return i
        return len(blocks)


class HostPool:
    """SGLang's MHA host KV pool in its page_first layout: kv_buffer is
    [2, pages * page_size, layers, heads, head_dim], so one page's K (or V)
    of every layer is one contiguous range. ``get_page_buffer_meta`` is the
    call SGLang's storage backends use to find those ranges."""

    layout = "page_first"

    def __init__(self, cfg: Config, pages: int):
        self.cfg = cfg
        self.page_size = cfg.block_size
        self.size = pages * cfg.block_size
        self.dtype = torch.float32
        self.kv_buffer = torch.zeros(2, self.size, cfg.layers, cfg.heads, cfg.head_dim)

    def get_ksize_per_token(self) -> int:
        c = self.cfg
        return c.layers * c.heads * c.head_dim * 4

    def get_size_per_token(self) -> int:
        return 2 * self.get_ksize_per_token()

    def get_page_buffer_meta(self, indices):
        ptrs, sizes = [], []
        n = self.page_size * self.get_ksize_per_token()
        for i in range(0, len(indices), self.page_size):
            start = int(indices[i])
            ptrs += [self.kv_buffer[0, start].data_ptr(), self.kv_buffer[1, start].data_ptr()]
            sizes += [n, n]
        return ptrs, sizes


class HiCacheConnector:
    """KV blocks through an SGLang HiCache storage backend: device blocks
    are copied into the host pool's pages (SGLang's write-back to host),
    then the backend moves pages between the host pool and the node."""

    def __init__(self, engine: Engine, backend, host_pages: int = 128):
        self.engine = engine
        self.backend = backend
        self.pool = HostPool(engine.cfg, host_pages)
        backend.register_mem_pool_host(self.pool)

    def _indices(self, n: int) -> torch.Tensor:
        if n > self.pool.size // self.pool.page_size:
            raise MemoryError(f"{n} pages do not fit the host pool")
        return torch.arange(n * self.pool.page_size, dtype=torch.int64)

    def lookup(self, hashes) -> int:
        return self.backend.batch_exists([h.hex() for h in hashes])

    def save(self, hashes, blocks) -> list[bool]:
        idx = self._indices(len(blocks))
        ps = self.pool.page_size
        for j, b in enumerate(blocks):
            for l, kv in enumerate(self.engine.kv):
                self.pool.kv_buffer[:, j * ps:(j + 1) * ps, l] = kv[:, b]
        return self.backend.batch_set_v1([h.hex() for h in hashes], idx)

    def load(self, hashes, blocks) -> int:
        idx = self._indices(len(blocks))
        ok = self.backend.batch_get_v1([h.hex() for h in hashes], idx)
        n = ok.index(False) if False in ok else len(ok)
        ps = self.pool.page_size
        for j, b in enumerate(blocks[:n]):
            for l, kv in enumerate(self.engine.kv):
                kv[:, b] = self.pool.kv_buffer[:, j * ps:(j + 1) * ps, l]
        return n
