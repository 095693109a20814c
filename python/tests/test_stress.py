"""Concurrency and a randomized model check against a real node."""

from __future__ import annotations

import ctypes
import os
import random
import threading
import unittest

from support import SHM, URL, client, fresh_namespace, need_server, pattern

from yuebing.mooncake import ErrorCode, MooncakeDistributedStore

MIB = 1 << 20
THREADS = 8
# Keys per thread; YUEBING_STRESS_KEYS lowers it for short runs.
KEYS = int(os.environ.get("YUEBING_STRESS_KEYS", "100"))
# Keys a thread writes before reading them back and removing them: keeps
# what is live at once (THREADS x ROUND MiB) well inside the node's DRAM.
ROUND = 10


@need_server
class StressTest(unittest.TestCase):
    def test_threads_share_one_store(self):
        """8 threads on one MooncakeDistributedStore, 1 MiB values: every
        byte read back is the byte its key was written with."""
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup({"local_hostname": "localhost", "master_server_address": URL, "namespace": fresh_namespace(),
                                  "local_buffer_size": "64MB", "shm": "auto" if SHM else False}), 0)
        self.addCleanup(s.close)
        failures: list[str] = []

        def worker(t: int) -> None:
            src = (ctypes.c_ubyte * (ROUND * MIB))()
            dst = (ctypes.c_ubyte * (ROUND * MIB))()
            ps, pd = ctypes.addressof(src), ctypes.addressof(dst)
            s.register_buffer(ps, ROUND * MIB)
            s.register_buffer(pd, ROUND * MIB)
            try:
                for r in range(0, KEYS, ROUND):
                    keys = [f"t{t}/k{i}" for i in range(r, min(r + ROUND, KEYS))]
                    for j, k in enumerate(keys):
                        ctypes.memmove(ps + j * MIB, pattern(t * 100000 + r + j, MIB), MIB)
                    if r % (2 * ROUND):
                        rcs = s.batch_put_from(keys, [ps + j * MIB for j in range(len(keys))], [MIB] * len(keys))
                    else:
                        rcs = [s.put_from(k, ps + j * MIB, MIB) for j, k in enumerate(keys)]
                    if rcs != [0] * len(keys):
                        failures.append(f"thread {t} put {keys}: {rcs}")
                        return
                    ctypes.memset(pd, 0, ROUND * MIB)
                    if r % (2 * ROUND):
                        got = [s.get_into(k, pd + j * MIB, MIB) for j, k in enumerate(keys)]
                    else:
                        got = s.batch_get_into(keys, [pd + j * MIB for j in range(len(keys))], [MIB] * len(keys))
                    if got != [MIB] * len(keys):
                        failures.append(f"thread {t} get {keys}: {got}")
                        return
                    for j, k in enumerate(keys):
                        if ctypes.string_at(pd + j * MIB, MIB) != pattern(t * 100000 + r + j, MIB):
                            failures.append(f"thread {t}: {k} read back other bytes")
                            return
                    if s.batch_remove(keys) != [0] * len(keys):
                        failures.append(f"thread {t}: remove {keys}")
                        return
            except Exception as e:  # reported below with the thread
                failures.append(f"thread {t}: {e!r}")
            finally:
                s.unregister_buffer(ps)
                s.unregister_buffer(pd)

        ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        self.assertEqual(failures, [])

    def test_random_sequence_against_a_dict(self):
        """Seeded random puts, upserts, gets, removes and batch calls
        through both APIs, checked against a dict after every step."""
        seed = int(os.environ.get("YUEBING_SEED", random.randrange(1 << 30)))
        rnd = random.Random(seed)
        ns = fresh_namespace()
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup({"local_hostname": "l", "master_server_address": URL, "namespace": ns,
                                  "shm": "auto" if SHM else False}), 0)
        self.addCleanup(s.close)
        c = client(namespace=ns)
        self.addCleanup(c.close)
        buf = (ctypes.c_ubyte * (256 << 10))()
        ptr = ctypes.addressof(buf)
        s.register_buffer(ptr, 256 << 10)
        model: dict[str, bytes] = {}
        names = [f"key-{i}" for i in range(24)]
        for step in range(400):
            k = rnd.choice(names)
            op = rnd.randrange(9)
            where = f"seed {seed} step {step} op {op} key {k}"
            if op == 0:
                v = rnd.randbytes(rnd.randrange(1, 200 << 10))
                self.assertEqual(s.put(k, v), 0, where)
                model.setdefault(k, v)
            elif op == 1:
                v = rnd.randbytes(rnd.randrange(1, 5000))
                self.assertEqual(s.upsert(k, v), 0, where)
                model[k] = v
            elif op == 2:
                self.assertEqual(s.get(k), model.get(k, b""), where)
            elif op == 3:
                self.assertEqual(s.remove(k), 0 if k in model else int(ErrorCode.OBJECT_NOT_FOUND), where)
                model.pop(k, None)
            elif op == 4:
                n = s.get_into(k, ptr, 256 << 10)
                if k in model:
                    self.assertEqual(n, len(model[k]), where)
                    self.assertEqual(ctypes.string_at(ptr, n), model[k], where)
                else:
                    self.assertEqual(n, int(ErrorCode.OBJECT_NOT_FOUND), where)
            elif op == 5:
                ks = rnd.sample(names, 5)
                self.assertEqual(s.batch_is_exist(ks), [int(x in model) for x in ks], where)
                self.assertEqual(s.get_batch(ks), [model.get(x, b"") for x in ks], where)
            elif op == 6:
                v = rnd.randbytes(rnd.randrange(1, 256 << 10))
                ctypes.memmove(ptr, v, len(v))
                self.assertEqual(s.put_from(k, ptr, len(v)), 0, where)
                model.setdefault(k, v)
            elif op == 7:
                if k in model:
                    self.assertEqual(c.get(k), model[k], where)
                    self.assertEqual(c.size(k), len(model[k]), where)
                else:
                    self.assertFalse(c.exists(k), where)
            else:
                ks = rnd.sample(names, 3)
                self.assertEqual(c.delete_many(ks), [x in model for x in ks], where)
                for x in ks:
                    model.pop(x, None)
        self.assertEqual(s.remove_all(), len(model))


if __name__ == "__main__":
    unittest.main()
