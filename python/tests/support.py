"""What the tests share: the node under test comes from the environment
(YUEBING_URL; the Go test in cmd/yuebing starts a real `yuebing serve` and
runs this suite against it), YUEBING_SHM=0 forces the socket data path."""

from __future__ import annotations

import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import yuebing  # noqa: E402

URL = os.environ.get("YUEBING_URL", "")
SHM = os.environ.get("YUEBING_SHM", "1") != "0"


def need_server(cls):
    return unittest.skipUnless(URL, "YUEBING_URL is not set: run through `go test ./cmd/yuebing -run Python`")(cls)


def fresh_namespace() -> str:
    """A namespace of its own per test, so tests never see each other's keys."""
    return "pytest/" + uuid.uuid4().hex[:12]


def client(**kw) -> "yuebing.Client":
    kw.setdefault("namespace", fresh_namespace())
    c = yuebing.Client(URL, shm="auto" if SHM else False, **kw)
    if SHM and not c.shm:
        raise AssertionError("shared memory was expected on the same host but could not be set up")
    return c


def pattern(seed: int, n: int) -> bytes:
    """n bytes that differ for every seed and at every offset's page: a
    random block of a prime length repeated, so a swapped or shifted page
    shows up."""
    rnd = __import__("random").Random(seed)
    unit = rnd.randbytes(4099)
    return (unit * (n // len(unit) + 1))[:n]
