"""Block keys as the server derives them (docs/keys.md): chained prefix
hashes of token ids, and opaque keys of object names."""

from __future__ import annotations

import hashlib
import struct

KEY_SIZE = 32
DEFAULT_BLOCK_SIZE = 256


def chain_keys(namespace: str, block_size: int, tokens) -> list[bytes]:
    """The keys of the full blocks of tokens: key[0] hashes the namespace's
    root and the first block's token ids, each next key the previous key
    and its block's ids (little-endian uint32)."""
    if not 16 <= block_size <= 1024:
        raise ValueError(f"block size {block_size}: want 16 to 1024")
    toks = list(tokens)
    for t in toks:
        if not isinstance(t, int) or not 0 <= t <= 0xFFFFFFFF:
            raise ValueError(f"token {t!r}: want an integer 0 to 2^32-1")
    prev = hashlib.sha256(b"yuebing/v1\x00" + namespace.encode() + b"\x00" + str(block_size).encode()).digest()
    keys = []
    for i in range(len(toks) // block_size):
        prev = hashlib.sha256(prev + struct.pack(f"<{block_size}I", *toks[i * block_size:(i + 1) * block_size])).digest()
        keys.append(prev)
    return keys


def opaque_key(namespace: str, name: str | bytes) -> bytes:
    """The key an object is stored under: SHA-256(namespace || 0x00 || name)."""
    raw = name.encode() if isinstance(name, str) else bytes(name)
    return hashlib.sha256(namespace.encode() + b"\x00" + raw).digest()


def parse_key(key) -> bytes:
    """A key as 32 raw bytes, from bytes or 64 hex digits."""
    if isinstance(key, str):
        try:
            b = bytes.fromhex(key)
        except ValueError:
            b = b""
        if len(b) != KEY_SIZE:
            raise ValueError(f"key {key!r}: want 64 hex digits")
        return b
    b = bytes(key)
    if len(b) != KEY_SIZE:
        raise ValueError(f"key of {len(b)} bytes: want {KEY_SIZE}")
    return b
