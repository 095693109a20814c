"""Time to first token of the tiny model for a 2,048-token prompt whose
first 1,920 tokens (120 blocks) are cached in a yuebing node, against
recomputing the whole prompt, in the same run:

    python3 python/examples/tiny_model/bench.py --url http://127.0.0.1:8080 [--json]

"pool" looks the prefix up, loads its 120 blocks through ``mooncake.store``
(as vLLM's connector does) into a fresh engine's paged cache and computes
the last 128 tokens; "recompute" computes all 2,048. Each is the median of
--repeat runs. With --json, one object ``{"results": [...]}`` on stdout,
a row per mode; the pool row's ratio is the recompute time over its own
(higher is better).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "mooncake-compat"))

import torch  # noqa: E402

from engine import Engine, MooncakeStoreConnector  # noqa: E402
from model import TinyModel  # noqa: E402

PROMPT, CACHED = 2048, 1920


def run(url: str, repeat: int, threads: int, namespace: str, prompt_len: int = PROMPT, cached: int = CACHED) -> list[dict]:
    from mooncake.store import MooncakeDistributedStore
    torch.set_num_threads(threads)
    model = TinyModel()
    rng = random.Random(1)
    bs = model.cfg.block_size
    if cached % bs or not 0 < cached < prompt_len:
        raise SystemExit(f"--cached {cached}: want a multiple of {bs} below --prompt {prompt_len}")
    prompt = [rng.randrange(model.cfg.vocab) for _ in range(prompt_len)]
    blocks = prompt_len // bs + 1
    stores = []

    def connector(engine):
        s = MooncakeDistributedStore()
        rc = s.setup({"master_server_address": url, "namespace": namespace, "local_hostname": "bench"})
        if rc != 0:
            raise SystemExit(f"setup against {url}: {rc}")
        stores.append(s)
        return MooncakeStoreConnector(engine, s)

    try:
        saver = Engine(model, blocks, connector)
        saver.prefill(prompt[:cached], save=True)
        recompute = Engine(model, blocks)
        pool = Engine(model, blocks, connector)
        times = {"recompute": [], "pool": []}
        for _ in range(repeat):
            t = time.perf_counter()
            want, _ = recompute.prefill(prompt, use_local=False)
            times["recompute"].append(time.perf_counter() - t)
            t = time.perf_counter()
            got, hit = pool.prefill(prompt, use_local=False)
            times["pool"].append(time.perf_counter() - t)
            if hit * bs != cached:
                raise SystemExit(f"the pool held {hit} blocks of the prefix, want {cached // bs}")
            if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
                raise SystemExit("the pool's logits differ from the recompute's")
    finally:
        if stores:
            stores[0].remove_all()
        for s in stores:
            s.close()
    base = statistics.median(times["recompute"])
    pool_s = statistics.median(times["pool"])
    return [
        {"name": "tiny_model", "mode": "recompute", "ttft_s": round(base, 4), "prompt_tokens": prompt_len,
         "cached_tokens": 0, "threads": threads, "runs": repeat},
        {"name": "tiny_model", "mode": "pool", "ttft_s": round(pool_s, 4), "prompt_tokens": prompt_len,
         "cached_tokens": cached, "threads": threads, "runs": repeat, "baseline": "recompute",
         "baseline_ttft_s": round(base, 4), "ratio": round(base / pool_s, 2)},
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("YUEBING_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--namespace", default=f"bench/tiny-model-{os.getpid()}")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadier on a shared CPU)")
    ap.add_argument("--prompt", type=int, default=PROMPT, help="prompt tokens")
    ap.add_argument("--cached", type=int, default=CACHED, help="tokens of it cached in the node (whole blocks)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows = run(a.url, max(1, a.repeat), a.threads, a.namespace, a.prompt, a.cached)
    if a.json:
        print(json.dumps({"results": rows}))
    else:
        print(f"{'name':<12} {'mode':<10} {'ttft_s':>8} {'cached':>7} {'vs recompute':>13}")
        for r in rows:
            ratio = f"{r['ratio']:.2f}x" if "ratio" in r else ""
            print(f"{r['name']:<12} {r['mode']:<10} {r['ttft_s']:>8.3f} {r['cached_tokens']:>7} {ratio:>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
