"""What the tests share: the node under test comes from the environment
(YUEBING_URL; the Go test in cmd/yuebing starts a real `yuebing serve` and
runs this suite against it), YUEBING_SHM=0 forces the socket data path,
YUEBING_BIN names the binary for tests that start nodes of their own (a
cluster whose node they kill)."""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
import unittest
import urllib.request
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
    rnd = random.Random(seed)
    unit = rnd.randbytes(4099)
    return (unit * (n // len(unit) + 1))[:n]


BIN = os.environ.get("YUEBING_BIN", "")


def need_binary(cls):
    return unittest.skipUnless(BIN, "YUEBING_BIN is not set: these tests start nodes of their own")(cls)


class Node:
    """A `yuebing serve` child process of BIN, started with args; its
    banner's lines (``banner["http"]`` is its URL). Stop it with kill."""

    def __init__(self, name: str, data_dir: str, args, env=None, timeout: float = 30):
        base = [BIN, "serve", "--node-name", name, "--http-listen", "127.0.0.1:0", "--transfer-listen",
                "127.0.0.1:0", "--resp-listen", "", "--data-dir", data_dir, "--dram-capacity", "64MiB",
                "--ssd-capacity", "128MiB", "--log-level", "warn"]
        # The node reads YUEBING_* as its configuration: none of the test's.
        e = {k: v for k, v in os.environ.items() if not k.startswith("YUEBING_")}
        e.update(env or {})
        self.name = name
        self.proc = subprocess.Popen(base + list(args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=e,
                                     text=True)
        lines: queue.Queue = queue.Queue()

        def read():
            with self.proc.stdout:
                for line in self.proc.stdout:
                    lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        self.banner: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        while "data" not in self.banner:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.kill()
                raise AssertionError(f"node {name} did not start (banner so far: {self.banner})")
            f = line.split()
            if len(f) >= 2:
                self.banner[f[0]] = f[1]
        self.url = self.banner["http"]

    def kill(self) -> None:
        """SIGKILL: the node gets no chance to tell anyone."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def start_cluster(root: str, names=("a", "b"), timeout: float = 30) -> list[Node]:
    """A cluster of real nodes under root: the first runs an embedded etcd
    (and so leads first), the others join it. Returns once every node sees
    every member and the leader has heard from each."""
    env = {"YUEBING_CLUSTER_ETCD_EMBEDDED_PEER_LISTEN": "127.0.0.1:0", "YUEBING_CLUSTER_REPORT_INTERVAL": "50ms"}
    common = ["--cluster", "pytest", "--lease-ttl", "2s", "--shutdown-timeout", "5s"]
    nodes: list[Node] = []
    try:
        nodes.append(Node(names[0], os.path.join(root, names[0]),
                          common + ["--etcd-embedded", "--etcd-embedded-listen", "127.0.0.1:0"], env))
        for n in names[1:]:
            nodes.append(Node(n, os.path.join(root, n), common + ["--etcd", nodes[0].banner["etcd"]], env))
        deadline = time.monotonic() + timeout
        while True:
            ready = True
            for n in nodes:
                try:
                    with urllib.request.urlopen(n.url + "/v1/cluster", timeout=2) as r:
                        st = json.load(r)
                except OSError:
                    ready = False
                    break
                nodes_seen = (st.get("leader_status") or {}).get("nodes") or []
                if not st.get("has_leader") or len(st.get("members") or []) != len(nodes) or len(nodes_seen) != len(nodes):
                    ready = False
                    break
            if ready:
                return nodes
            if time.monotonic() > deadline:
                raise AssertionError("the cluster did not form")
            time.sleep(0.1)
    except BaseException:
        for n in nodes:
            n.kill()
        raise
