#!/usr/bin/env python3
"""Recompute yuebing's block key test vectors from the specification alone.

Usage: check_vectors.py vectors.json

This file is a reference for clients in other languages: it implements
docs/keys.md with nothing but hashlib and struct.
"""
import hashlib
import json
import struct
import sys


def root(namespace: str, block_size: int) -> bytes:
    return hashlib.sha256(b"yuebing/v1\x00" + namespace.encode() + b"\x00" + str(block_size).encode()).digest()


def chain_keys(namespace: str, block_size: int, tokens: list[int]) -> list[str]:
    prev, keys = root(namespace, block_size), []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        block = tokens[start:start + block_size]
        prev = hashlib.sha256(prev + struct.pack("<%dI" % block_size, *block)).digest()
        keys.append(prev.hex())
    return keys


def opaque_key(namespace: str, raw: bytes) -> str:
    return hashlib.sha256(namespace.encode() + b"\x00" + raw).hexdigest()


def main() -> int:
    with open(sys.argv[1]) as f:
        vectors = json.load(f)
    bad = 0
    for i, v in enumerate(vectors["chained"]):
        if root(v["namespace"], v["block_size"]).hex() != v["root"]:
            print(f"chained case {i}: root mismatch")
            bad += 1
        if chain_keys(v["namespace"], v["block_size"], v["tokens"]) != v["keys"]:
            print(f"chained case {i}: keys mismatch")
            bad += 1
    for i, v in enumerate(vectors["opaque"]):
        if opaque_key(v["namespace"], bytes.fromhex(v["raw_hex"])) != v["key"]:
            print(f"opaque case {i}: key mismatch")
            bad += 1
    if bad:
        return 1
    print(f"ok: {len(vectors['chained'])} chained and {len(vectors['opaque'])} opaque vectors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
