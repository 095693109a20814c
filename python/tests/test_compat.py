"""The `mooncake` drop-in (python/mooncake-compat) on a real node: the
module the connectors import, their configuration files and variables,
the calls Mooncake added in 2025-26, the bindings' type checks, and bad
input: unregistered memory, wrong sizes, over-long keys, a node that dies
between two batches."""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from support import URL, fresh_namespace, need_server

HERE = os.path.dirname(os.path.abspath(__file__))
COMPAT = os.path.join(HERE, "..", "mooncake-compat")
sys.path.insert(0, COMPAT)

from mooncake.store import ErrorCode, MooncakeDistributedStore, ReplicateConfig, SoftPinAction  # noqa: E402
from yuebing.mooncake import load_config  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

INVALID, NOT_FOUND, RPC_FAIL = int(ErrorCode.INVALID_PARAMS), int(ErrorCode.OBJECT_NOT_FOUND), int(ErrorCode.RPC_FAIL)


def _env(**kv):
    """A context manager setting (or with None, removing) variables."""
    class Env:
        def __enter__(self):
            self.old = {k: os.environ.get(k) for k in kv}
            for k, v in kv.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        def __exit__(self, *exc):
            for k, v in self.old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return Env()


_CONFIG_VARS = {k: None for k in ("MOONCAKE_CONFIG_PATH", "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER",
                                  "MOONCAKE_TENANT_ID", "MOONCAKE_LOCAL_HOSTNAME", "LOCAL_HOSTNAME")}


class ShadowTest(unittest.TestCase):
    def test_refuses_beside_real_mooncake(self):
        # A site-packages holding Mooncake's own distribution's metadata.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        info = os.path.join(d, "mooncake_transfer_engine-0.3.7.dist-info")
        os.mkdir(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: mooncake-transfer-engine\nVersion: 0.3.7\n")
        code = ("import sys; sys.path[:0] = [%r, %r]\n"
                "try:\n import mooncake\nexcept ImportError as e: print('refused:', e)\nelse: print('loaded')") % (d, COMPAT)
        env = {k: v for k, v in os.environ.items() if k != "YUEBING_MOONCAKE_COMPAT"}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
        self.assertIn("refused: both Mooncake (mooncake-transfer-engine 0.3.7)", out)
        env["YUEBING_MOONCAKE_COMPAT"] = "force"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
        self.assertEqual(out.strip(), "loaded")

    def test_marker(self):
        import mooncake
        self.assertTrue(mooncake.YUEBING)


class ReplicateConfigTest(unittest.TestCase):
    def test_binding_checks(self):
        c = ReplicateConfig()
        c.soft_pin_ttl_ms = (1 << 64) - 1
        c.replica_num = 3
        c.preferred_segments = ["a", "b"]
        for field, v in [("soft_pin_ttl_ms", -1), ("soft_pin_ttl_ms", 1 << 64), ("soft_pin_ttl_ms", 2.0),
                         ("replica_num", -2), ("replica_num", "2"), ("with_soft_pin", 1), ("with_hard_pin", None),
                         ("soft_pin_action", 7), ("preferred_segment", 3), ("preferred_segments", "ab")]:
            with self.assertRaises(TypeError, msg=f"{field}={v!r}"):
                setattr(c, field, v)
        self.assertEqual(c.replica_num, 3)  # a refused assignment leaves the field as it was
        with self.assertRaises(AttributeError):
            c.nonexistent = 1

    def test_retention(self):
        c = ReplicateConfig()
        self.assertIsNone(c.retention())
        c.with_soft_pin = True
        self.assertEqual(c.retention(), "high")
        c.with_hard_pin = True
        self.assertEqual(c.retention(), "pinned")
        d = ReplicateConfig()
        d.soft_pin_action = SoftPinAction.ENABLE
        self.assertEqual((d.retention(), d.retention_ttl()), ("high", 1800))  # Mooncake's default TTL, 30 min
        d.soft_pin_ttl_ms = 1500
        self.assertEqual(d.retention_ttl(), 2)  # rounded up to whole seconds
        d.soft_pin_ttl_ms = 0
        self.assertIsNone(d.retention())  # Mooncake: a zero TTL pins nothing
        d.soft_pin_action = SoftPinAction.DISABLE
        self.assertEqual((d.retention(), d.retention_ttl()), ("normal", None))
        self.assertIsNone(c.retention_ttl())  # a hard pin has no end


class ConfigTest(unittest.TestCase):
    def test_sources(self):
        with _env(**_CONFIG_VARS):
            with self.assertRaises(ValueError):
                load_config()
            self.assertEqual(load_config({"master_server_address": "n:1"})["master_server_address"], "n:1")
        with _env(**{**_CONFIG_VARS, "MOONCAKE_MASTER": "10.0.0.1:8080", "MOONCAKE_TENANT_ID": "t1",
                     "LOCAL_HOSTNAME": "h1"}):
            cfg = load_config({"unrelated": 1})
            self.assertEqual((cfg["master_server_address"], cfg["tenant_id"], cfg["local_hostname"]),
                             ("10.0.0.1:8080", "t1", "h1"))
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "mooncake.json")
        with open(path, "w") as f:
            json.dump({"local_hostname": "x", "metadata_server": "P2PHANDSHAKE", "global_segment_size": "4GB",
                       "local_buffer_size": 16 << 20, "protocol": "tcp", "device_name": "",
                       "master_server_address": "127.0.0.1:9"}, f)
        for var in ("MOONCAKE_CONFIG_PATH", "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"):
            with _env(**{**_CONFIG_VARS, var: path, "MOONCAKE_MASTER": "ignored:1"}):
                self.assertEqual(load_config()["master_server_address"], "127.0.0.1:9")
        with open(path, "w") as f:
            f.write("{not json")
        with _env(**{**_CONFIG_VARS, "MOONCAKE_CONFIG_PATH": path}):
            with self.assertRaises(ValueError):
                load_config()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@need_server
class CompatTest(unittest.TestCase):
    def setUp(self):
        self.ns = fresh_namespace()
        self.s = MooncakeDistributedStore()
        # What vLLM's and LMCache's connectors do: read MOONCAKE_CONFIG_PATH
        # and hand its values to setup's positional form.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "mooncake.json")
        with open(path, "w") as f:
            json.dump({"local_hostname": "engine-0", "metadata_server": "P2PHANDSHAKE", "global_segment_size": 3355443200,
                       "local_buffer_size": 1073741824, "protocol": "tcp", "device_name": "",
                       "master_server_address": URL.split("://", 1)[-1]}, f)
        with _env(**{**_CONFIG_VARS, "MOONCAKE_CONFIG_PATH": path, "YUEBING_NAMESPACE": self.ns}):
            c = load_config()
            self.assertEqual(self.s.setup(c["local_hostname"], c["metadata_server"], c["global_segment_size"],
                                          c["local_buffer_size"], c["protocol"], c["device_name"],
                                          c["master_server_address"]), 0)
        self.addCleanup(self.s.close)
        self.buf = (ctypes.c_ubyte * (1 << 20))()
        self.ptr = ctypes.addressof(self.buf)
        self.assertEqual(self.s.register_buffer(self.ptr, 1 << 20), 0)

    def test_setup_keywords(self):
        # The binding's keyword names, as a connector that passes them by
        # name calls it, and the keywords newer releases added.
        s = MooncakeDistributedStore()
        with _env(YUEBING_NAMESPACE=self.ns):
            rc = s.setup(local_hostname="engine-1", metadata_server="P2PHANDSHAKE", global_segment_size=1 << 30,
                         local_buffer_size=16 << 20, protocol="rdma", rdma_devices="mlx5_0",
                         master_server_addr=URL.split("://", 1)[-1], enable_client_http_server=True,
                         client_http_port=9003, enable_ssd_offload=True, ssd_offload_path="/tmp/x")
        self.assertEqual(rc, 0)
        self.addCleanup(s.close)
        self.assertEqual(s.get_hostname(), "engine-1")
        self.assertEqual(s.put("kw", b"v"), 0)
        self.assertEqual(self.s.get("kw"), b"v")

    def test_health_and_replicas(self):
        self.assertEqual(self.s.health_check(), 0)
        self.assertEqual(MooncakeDistributedStore().health_check(), INVALID)  # before setup
        self.assertEqual(self.s.put("a", b"x" * 1000), 0)
        d = self.s.get_replica_desc("a")
        self.assertEqual(len(d), 1)
        self.assertTrue(d[0].is_memory_replica() or d[0].is_disk_replica(), d)
        self.assertEqual(d[0].status, "COMPLETE")
        both = self.s.batch_get_replica_desc(["a", "missing", "x" * 300])
        self.assertEqual((len(both["a"]), both["missing"], both["x" * 300]), (1, [], []))

    def test_hard_pin_is_the_pinned_class(self):
        # The node bounds each namespace's pinned bytes (retention.pinned_quota,
        # by default a quarter of the DRAM tier): a hard pin counts, a soft
        # pin (high) and a plain put do not, and a put with DISABLE puts a
        # pinned object back in normal, which frees its share.
        with urllib.request.urlopen(URL + "/v1/tiers", timeout=10) as r:
            quota = json.load(r)["tiers"][0]["capacity_bytes"] // 4
        size = quota * 5 // 8  # one fits, two do not
        value = bytes(size)
        hard, soft, off = ReplicateConfig(), ReplicateConfig(), ReplicateConfig()
        hard.with_hard_pin = True
        soft.with_soft_pin = True
        soft.soft_pin_ttl_ms = 60_000
        off.soft_pin_action = SoftPinAction.DISABLE
        self.addCleanup(self.s.remove_all)
        self.assertEqual(self.s.put("h1", value, hard), 0)
        self.assertEqual(self.s.put("h2", value, hard), int(ErrorCode.NO_AVAILABLE_HANDLE))  # over the quota
        self.assertEqual(self.s.is_exist("h2"), 0)  # nothing stored
        self.assertEqual(self.s.put("s1", value, soft), 0)  # high is not pinned
        self.assertEqual(self.s.put("p1", value), 0)
        self.assertEqual(self.s.put("h1", b"ignored: objects are immutable", off), 0)  # releases h1's pin
        self.assertEqual(self.s.get_size("h1"), size)
        self.assertEqual(self.s.put("h2", value, hard), 0)  # room again
        self.assertEqual(self.s.remove("h2"), 0)  # a delete frees the share too
        self.assertEqual(self.s.upsert("h3", value, hard), 0)

    def test_pinned_puts(self):
        hard = ReplicateConfig()
        hard.with_hard_pin = True
        self.assertEqual(self.s.put("h", b"hard", hard), 0)
        self.assertEqual(self.s.get("h"), b"hard")
        self.assertEqual(self.s.batch_put_from(["h2"], [self.ptr], [10], hard), [0])
        self.assertEqual(self.s.get_size("h2"), 10)

    def test_bad_input(self):
        arr = (ctypes.c_ubyte * 64)()
        unreg = ctypes.addressof(arr)
        self.assertEqual(self.s.put_from("k", unreg, 64), INVALID)  # not registered
        self.assertEqual(self.s.put_from("k", self.ptr + (1 << 20) - 10, 64), INVALID)  # runs past its end
        self.assertEqual(self.s.get_into("k", unreg, 64), INVALID)
        self.assertEqual(self.s.put_from("k" * 257, self.ptr, 64), INVALID)  # key over 256 bytes
        self.assertEqual(self.s.is_exist("k"), 0)
        self.assertEqual(self.s.put("big", bytes(4096)), 0)
        self.buf[0:16] = bytes(range(16))
        self.assertEqual(self.s.get_into("big", self.ptr, 100), INVALID)  # too small: nothing written
        self.assertEqual(bytes(self.buf[0:16]), bytes(range(16)))
        self.assertEqual(self.s.batch_get_into_multi_buffers(["big"], [[self.ptr, self.ptr + 200]], [[100, 100]]),
                         [INVALID])
        self.assertEqual(bytes(self.buf[0:16]), bytes(range(16)))
        self.assertEqual(self.s.batch_put_from_multi_buffers(["a", "b"], [[self.ptr]], [[1]]), [INVALID, INVALID])
        self.assertEqual(self.s.batch_get_into(["big", "nope"], [self.ptr, self.ptr + 8192], [8192, 16]),
                         [4096, NOT_FOUND])

    @unittest.skipIf(torch is None, "torch is not importable: apt-get install python3-torch python3-numpy")
    def test_tensors(self):
        t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
        self.assertEqual(self.s.put_tensor("t", t), 0)
        self.assertTrue(torch.equal(self.s.get_tensor("t"), t))
        b = torch.tensor([[1.5, -2]], dtype=torch.bfloat16)
        self.assertEqual(self.s.batch_put_tensor(["t1", "t2"], [b, t.to(torch.int64)]), [0, 0])
        got = self.s.batch_get_tensor(["t1", "t2", "none"])
        self.assertTrue(torch.equal(got[0], b) and got[0].dtype == torch.bfloat16)
        self.assertTrue(torch.equal(got[1], t.to(torch.int64)))
        self.assertIsNone(got[2])
        into = self.s.get_tensor_into("t", self.ptr, 1 << 20)
        self.assertTrue(torch.equal(into, t))
        self.assertEqual(into.data_ptr(), self.ptr + 304)  # a view of the registered buffer, past the header
        self.assertEqual(self.s.put_tensor("bad", torch.zeros([1] * 9)), INVALID)  # over 8 dimensions
        self.assertEqual(self.s.put_tensor("bad", [1, 2]), INVALID)  # not a tensor
        self.assertEqual(self.s.put("raw", b"not a tensor at all, just some bytes here"), 0)
        self.assertIsNone(self.s.get_tensor("raw"))


@need_server
@unittest.skipUnless(os.environ.get("YUEBING_BIN"), "YUEBING_BIN is not set: the dead-node test starts its own node")
class DeadNodeTest(unittest.TestCase):
    def test_node_dies_between_batches(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        port = _free_port()
        node = subprocess.Popen([os.environ["YUEBING_BIN"], "serve", "--http-listen", f"127.0.0.1:{port}",
                                 "--resp-listen", "", "--transfer-listen", "", "--data-dir", d,
                                 "--dram-capacity", "32MiB", "--ssd-capacity", "64MiB"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(node.wait)
        self.addCleanup(node.kill)
        s = MooncakeDistributedStore()
        deadline = time.monotonic() + 30
        while s.setup({"master_server_address": f"127.0.0.1:{port}", "namespace": "dead/test"}) != 0:
            self.assertLess(time.monotonic(), deadline, "node did not start")
            time.sleep(0.1)
        self.addCleanup(s.close)
        buf = (ctypes.c_ubyte * 4096)()
        ptr = ctypes.addressof(buf)
        self.assertEqual(s.register_buffer(ptr, 4096), 0)
        self.assertEqual(s.batch_put_from(["a", "b"], [ptr, ptr + 1024], [1024, 1024]), [0, 0])
        node.kill()
        node.wait()
        buf[:] = bytes(4096)
        got = s.batch_get_into(["a", "b"], [ptr, ptr + 1024], [1024, 1024])
        self.assertTrue(all(r in (RPC_FAIL, int(ErrorCode.RPC_TIMEOUT)) for r in got), got)
        self.assertEqual(bytes(buf), bytes(4096))  # nothing half-written
        self.assertTrue(all(r < 0 for r in s.batch_put_from(["c"], [ptr], [10])))
        self.assertEqual(s.health_check(), RPC_FAIL)
        self.assertEqual(s.batch_is_exist(["a"]), [-1])


if __name__ == "__main__":
    unittest.main()
