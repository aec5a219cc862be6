"""Micro-benchmark of routing.cache_affinity: what the decision adds to one pick.

``BackendPool.choose`` over three equal deployments of one model, with the
affinity off (RoundRobin picks), on with a ``prompt_cache_key``, and on with
the prompt prefix as the key (a chat body with a 2 kB system prompt, cut to
``max_prefix_length``), interleaved, best of ``--rounds`` (the least
disturbed run on a shared machine). CPU time per pick in microseconds
(``time.process_time_ns``); a whole plain call costs about 2.4 M instructions,
so the difference is to be read against that.

    python tests/perf/affinity_bench.py [--picks 50000] [--rounds 7] [--prefix 256]

In-process only: no sockets, no servers.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from switchyard.actors.health import HealthView
from switchyard.actors.messages import Call
from switchyard.actors.pool import BackendPool
from switchyard.config.load import load_text

CONFIG = """
{affinity}
prefix_routing: {{max_prefix_length: {prefix}}}
backends:
  - {{name: a, url: 'http://127.0.0.1:1', models: [demo]}}
  - {{name: b, url: 'http://127.0.0.1:2', models: [demo]}}
  - {{name: c, url: 'http://127.0.0.1:3', models: [demo]}}
"""
SYSTEM = "You are the support assistant of a hardware shop; answer briefly and politely. " * 26


def calls(affinity: bool, key: bool, prefix: int) -> tuple[BackendPool, Call]:
    text = CONFIG.format(affinity="routing: {cache_affinity: {enabled: true}}" if affinity else "", prefix=prefix)
    snapshot = load_text(text, env={}).snapshot
    payload = {"model": "demo", "messages": [{"role": "system", "content": SYSTEM},
                                             {"role": "user", "content": "Where is my order?"}]}
    if key:
        payload["prompt_cache_key"] = "customer-4711"
    call = Call(model="demo", stream=False, body=json.dumps(payload).encode(), payload=payload, snapshot=snapshot)
    return BackendPool(snapshot), call


def per_pick(pool: BackendPool, call: Call, picks: int) -> float:
    health = HealthView(backends={})
    discovered: dict[str, frozenset[str]] = {}
    choose = pool.choose
    began = time.process_time_ns()
    for _ in range(picks):
        choose(call, "demo", health, discovered, 0.0)
    return (time.process_time_ns() - began) / picks / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--picks", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--prefix", type=int, default=256, help="prefix_routing.max_prefix_length")
    args = parser.parse_args()
    cases = {"off (RoundRobin)": calls(False, False, args.prefix),
             "on, prompt_cache_key": calls(True, True, args.prefix),
             "on, prefix": calls(True, False, args.prefix)}
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(args.rounds):
        for name, (pool, call) in cases.items():
            best[name] = min(best[name], per_pick(pool, call, args.picks))
    base = best["off (RoundRobin)"]
    for name, us in best.items():
        print(f"{name:24} {us:6.2f} µs per pick   (+{us - base:5.2f} µs)")


if __name__ == "__main__":
    main()
