"""A tiny real decoder-only transformer in PyTorch (CPU, float32) with a
paged KV cache laid out as vLLM lays it out: per layer one tensor of shape
[2, num_blocks, block_size, heads, head_dim] (K then V).

The weights are random from a fixed seed: the model computes nothing
useful, but it computes real attention over real keys and values, so a KV
block that comes back from the pool with one bit changed changes its
logits. It is an example and a test fixture, never a dependency of the
yuebing package.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Config:
    vocab: int = 512
    layers: int = 4
    heads: int = 8
    head_dim: int = 64
    ffn: int = 1024
    block_size: int = 16
    rope_base: float = 10000.0
    seed: int = 0

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim

    def block_bytes(self) -> int:
        """Bytes of one block's K (or V) in one layer."""
        return self.block_size * self.heads * self.head_dim * 4


class TinyModel:
    """The model's weights and its forward pass over one chunk of a
    sequence whose earlier tokens' KV already sits in the paged cache."""

    def __init__(self, cfg: Config = Config()):
        self.cfg = cfg
        g = torch.Generator().manual_seed(cfg.seed)
        d, f = cfg.hidden, cfg.ffn

        def w(*shape, scale):
            return torch.randn(*shape, generator=g) * scale

        self.embed = w(cfg.vocab, d, scale=1.0)
        self.layers = []
        for _ in range(cfg.layers):
            self.layers.append({
                "wqkv": w(d, 3 * d, scale=1 / math.sqrt(d)),
                "wo": w(d, d, scale=1 / math.sqrt(d)),
                "w1": w(d, f, scale=1 / math.sqrt(d)),
                "w2": w(f, d, scale=1 / math.sqrt(f)),
            })
        self.head = w(d, cfg.vocab, scale=1 / math.sqrt(d))
        inv = 1.0 / (cfg.rope_base ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
        self._inv_freq = inv

    def new_kv_caches(self, num_blocks: int) -> list[torch.Tensor]:
        c = self.cfg
        return [torch.zeros(2, num_blocks, c.block_size, c.heads, c.head_dim) for _ in range(c.layers)]

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        ang = pos[:, None].float() * self._inv_freq[None, :]  # (n, hd/2)
        cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x1 * cos - x2 * sin
        out[..., 1::2] = x1 * sin + x2 * cos
        return out

    # Queries attended to at once: the scores of a chunk (heads x 256 x
    # keys) stay in cache where a 2,048-token prompt's whole matrix
    # (134 MB) would not.
    Q_CHUNK = 256

    def _attend(self, q, keys, vals, mask) -> torch.Tensor:
        """Causal attention of q (n, heads, hd) over keys and vals (heads,
        k, hd); mask (n, k) is True where a query may not look."""
        c = self.cfg
        q = (q * (1.0 / math.sqrt(c.head_dim))).transpose(0, 1)  # (heads, n, hd)
        out = torch.empty(q.shape[1], c.heads, c.head_dim)
        for i in range(0, q.shape[1], self.Q_CHUNK):
            s = torch.matmul(q[:, i:i + self.Q_CHUNK], keys.transpose(1, 2))
            s.masked_fill_(mask[None, i:i + self.Q_CHUNK], float("-inf"))
            out[i:i + self.Q_CHUNK] = torch.matmul(s.softmax(-1), vals).transpose(0, 1)
        return out.reshape(q.shape[1], c.hidden)

    @staticmethod
    def _norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    @torch.no_grad()
    def forward(self, tokens, start: int, kv_caches: list[torch.Tensor], block_table: list[int]) -> torch.Tensor:
        """Runs tokens (positions start .. start+n-1) through the model,
        writing their K and V into the cache at the slots block_table gives
        and attending to every earlier position's K and V read from there.
        Returns the last position's logits."""
        c = self.cfg
        n = len(tokens)
        end = start + n
        if len(block_table) * c.block_size < end:
            raise ValueError(f"{len(block_table)} blocks hold fewer than {end} positions")
        pos = torch.arange(start, end)
        table = torch.tensor(block_table, dtype=torch.long)
        slot_block = table[pos // c.block_size]
        slot_off = pos % c.block_size
        used = table[: (end + c.block_size - 1) // c.block_size]
        # Key j may be seen by query i (position start+i) when j <= start+i.
        mask = torch.arange(end)[None, :] > pos[:, None]
        x = self.embed[torch.as_tensor(tokens, dtype=torch.long)]
        for layer, kv in zip(self.layers, kv_caches):
            h = self._norm(x)
            q, k, v = (h @ layer["wqkv"]).split(c.hidden, dim=-1)
            q = self._rope(q.view(n, c.heads, c.head_dim), pos)
            k = self._rope(k.view(n, c.heads, c.head_dim), pos)
            kv[0, slot_block, slot_off] = k
            kv[1, slot_block, slot_off] = v.view(n, c.heads, c.head_dim)
            keys = kv[0, used].reshape(-1, c.heads, c.head_dim)[:end]
            vals = kv[1, used].reshape(-1, c.heads, c.head_dim)[:end]
            x = x + self._attend(q, keys.transpose(0, 1), vals.transpose(0, 1), mask) @ layer["wo"]
            x = x + torch.nn.functional.silu(self._norm(x) @ layer["w1"]) @ layer["w2"]
        return self._norm(x[-1]) @ self.head


def block_hashes(tokens, block_size: int, seed: bytes = b"tiny-model") -> list[bytes]:
    """vLLM's prefix-cache hashing in spirit: each full block's hash chains
    its parent's hash and its token ids, so equal hashes mean equal
    prefixes. Only full blocks are hashed."""
    out, parent = [], hashlib.sha256(seed).digest()
    for i in range(len(tokens) // block_size):
        blk = tokens[i * block_size:(i + 1) * block_size]
        parent = hashlib.sha256(parent + struct.pack(f"<{block_size}I", *blk)).digest()
        out.append(parent)
    return out
