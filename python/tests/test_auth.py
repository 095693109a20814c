"""Bearer tokens and tenants, against a node with --auth-tokens-file."""

from __future__ import annotations

import os
import unittest

from support import SHM

import yuebing
from yuebing.mooncake import ErrorCode, MooncakeDistributedStore

URL = os.environ.get("YUEBING_AUTH_URL", "")
ALPHA = os.environ.get("YUEBING_TEST_TOKEN_ALPHA", "")
BETA = os.environ.get("YUEBING_TEST_TOKEN_BETA", "")


@unittest.skipUnless(URL and ALPHA and BETA, "YUEBING_AUTH_URL is not set: run through `go test ./cmd/yuebing -run Python`")
class AuthTest(unittest.TestCase):
    def client(self, token, namespace):
        c = yuebing.Client(URL, token=token, namespace=namespace, shm="auto" if SHM else False)
        self.addCleanup(c.close)
        return c

    def test_tokens_and_tenants(self):
        a = self.client(ALPHA, "alpha/m")
        self.assertEqual(a.shm, SHM)  # the shared-memory session takes the token too
        a.put("x", b"alpha's bytes")
        buf = bytearray(100)
        self.assertEqual(a.get_into("x", buf), 13)
        with self.assertRaises(yuebing.Unauthenticated):
            self.client(None, "alpha/m").get("x")
        with self.assertRaises(yuebing.Unauthenticated):
            self.client("wrong-token-000000000", "alpha/m").put("y", b"1")
        b = self.client(BETA, "beta/m")
        # Another tenant's object reads exactly like a missing one; calls
        # naming its namespace for a batch are refused.
        with self.assertRaises(yuebing.NotFound):
            b.get("x", namespace="alpha/m")
        with self.assertRaises(yuebing.Forbidden):
            b.get_many(["x"], namespace="alpha/m")
        with self.assertRaises(yuebing.Forbidden if SHM else yuebing.NotFound):
            b.get_into("x", bytearray(100), namespace="alpha/m")
        with self.assertRaises(yuebing.NotFound):
            b.get("x")  # beta's own namespace has no x
        # Another tenant's block by key reads as missing, existence does not leak.
        key = yuebing.opaque_key("alpha/m", "x")
        self.assertEqual(b.get_many_into(keys=[key], bufs=[bytearray(100)])[0].status, "missing")
        with self.assertRaises(yuebing.Forbidden):
            b.clear("alpha/m")
        self.assertEqual(a.get("x"), b"alpha's bytes")

    def test_mooncake_with_tokens(self):
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup({"local_hostname": "l", "master_server_address": URL, "namespace": "alpha/mc",
                                  "token": ALPHA, "shm": "auto" if SHM else False}), 0)
        self.addCleanup(s.close)
        self.assertEqual(s.put("k", b"v"), 0)
        self.assertEqual(s.get("k"), b"v")
        bad = MooncakeDistributedStore()
        self.assertEqual(bad.setup({"local_hostname": "l", "master_server_address": URL, "namespace": "alpha/mc",
                                    "token": "wrong-token-000000000"}), 0)  # health needs no token
        self.addCleanup(bad.close)
        self.assertEqual(bad.put("k2", b"v"), int(ErrorCode.ILLEGAL_CLIENT))
        self.assertEqual(bad.get("k"), b"")
        other = MooncakeDistributedStore()
        self.assertEqual(other.setup({"local_hostname": "l", "master_server_address": URL, "namespace": "alpha/mc",
                                      "token": BETA}), 0)
        self.addCleanup(other.close)
        self.assertEqual(other.put("k3", b"v"), int(ErrorCode.ILLEGAL_CLIENT))
        self.assertEqual(other.is_exist("k"), 0)  # another tenant's: as if missing
        self.assertEqual(other.get("k"), b"")


if __name__ == "__main__":
    unittest.main()
