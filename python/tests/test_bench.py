"""The benchmark's connector-shaped batch rows (python3 -m yuebing.bench):
one row per op and path, the bytes of every value counted, and the values
read back whole."""

from __future__ import annotations

import io
import unittest

from support import SHM, URL, need_server

from yuebing import bench


@need_server
class BenchBatchRowsTest(unittest.TestCase):
    def test_batch_rows(self):
        n, size = 3, 1 << 20
        rows = bench.run(URL, [size], budget=n * size, rounds=1, progress=io.StringIO(), batch_n=n,
                         batch_sizes=(size,))
        by = {r["name"]: r for r in rows}
        paths = ["socket"] + (["shm", "registered"] if SHM else [])
        for op in ("batch_get_into_x3", "batch_put_from_x3"):
            for path in paths:
                r = by.get(f"{op}/1MiB/{path}")
                self.assertIsNotNone(r, f"no {op}/1MiB/{path} in {sorted(by)}")
                for f in ("us_per_call", "gbps", "baseline_gbps", "ratio", "vs_memcpy"):
                    self.assertGreater(r[f], 0, f"{r['name']}: {f}")
                self.assertEqual(r["size"], size)
                # A batch call moves all n values: its rate counts them.
                self.assertAlmostEqual(r["gbps"], n * size / (r["us_per_call"] / 1e6) / 1e9, delta=0.05 * r["gbps"] + 0.01)
                self.assertTrue(r["baseline"].startswith("raw socket"))
        # The rows every earlier run had are still there, named as before.
        for name in ("get_into/1MiB/socket", "batch_get_into/1MiB/socket", "put_from/1MiB/socket"):
            self.assertIn(name, by)

    def test_no_batch_rows(self):
        rows = bench.run(URL, [64 << 10], budget=256 << 10, rounds=1, progress=io.StringIO())
        self.assertFalse([r["name"] for r in rows if "_x" in r["op"]], "batch rows at a size not in BATCH_SIZES")


if __name__ == "__main__":
    unittest.main()
