"""What the KV index costs one pick: the scorer at 10,000 entries per backend and a 2,000-token prompt.

Three backends, each holding ``--entries`` blocks in the index (one holds the
whole prompt, one half of it, one none of it), and a prompt of ``--tokens``
tokens (125 blocks of 16). Measured separately, in microseconds of CPU time
(``time.process_time_ns``), best of ``--rounds`` (the least disturbed run on a
shared machine):

- the scorer: ``KvIndex.held`` for each candidate, then ``kv_scorer.decide``;
- the prompt's keys: the chain hash of its full blocks, computed, then from
  the key cache (a conversation's earlier turns);
- a whole ``BackendPool.choose`` of a chat call on simulated backends (its
  prompt tokenized by the simulated engines' tokenizer), with the index on and
  off.

    python tests/perf/kv_scorer_cost.py [--entries 10000] [--tokens 2000] [--rounds 5]

In-process only: no sockets, no servers. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from switchyard.actors.health import HealthView
from switchyard.actors.messages import Call
from switchyard.actors.pool import BackendPool
from switchyard.actors.routing import kv_scorer
from switchyard.actors.routing.kv_blocks import KeyCache, chain
from switchyard.actors.routing.kv_index import KvIndex
from switchyard.config.load import load_text

NAMES = ("a", "b", "c")
CONFIG = """
kv_cache_index: {{enabled: {enabled}, max_entries: {entries}}}
backends:
  - {{name: a, type: simulated, models: [demo]}}
  - {{name: b, type: simulated, models: [demo]}}
  - {{name: c, type: simulated, models: [demo]}}
"""


def filled(index: KvIndex, keys: list[int], entries: int, rng: random.Random) -> None:
    """Each backend full of other prompts' blocks; a holds the prompt, b its first half, c none of it."""
    for name, held in zip(NAMES, (len(keys), len(keys) // 2, 0), strict=True):
        index.record(name, [rng.getrandbits(64) for _ in range(entries - held)] + keys[:held], 0.0, 1e9)


def best_of(rounds: int, repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        began = time.process_time_ns()
        for _ in range(repeat):
            fn()
        best = min(best, (time.process_time_ns() - began) / repeat / 1000)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--tokens", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    tokens = [rng.randrange(50_000) for _ in range(args.tokens)]
    keys = chain(tokens, 16)
    index = KvIndex(16, args.entries)
    index.configure(dict.fromkeys(NAMES, False), block_size=16, max_entries=args.entries, tier_weights={})
    filled(index, keys, args.entries, rng)
    weights, in_flight = kv_scorer.Weights(), {"a": 1, "b": 1, "c": 0}

    def score() -> kv_scorer.KvDecision:
        held = {name: index.held(name, keys, 1.0) for name in NAMES}
        return kv_scorer.decide(NAMES, held, len(keys), in_flight, weights)

    assert score().chosen == "a"
    cache = KeyCache()
    chain(tokens, 16, cache=cache)
    print(f"{args.entries} entries per backend, 3 backends, a prompt of {args.tokens} tokens ({len(keys)} blocks)")
    print(f"scorer (held x3 + decide)          {best_of(args.rounds, 2_000, score):8.1f} µs per pick")
    hashed = best_of(args.rounds, 20, lambda: chain(tokens, 16))
    cached = best_of(args.rounds, 200, lambda: chain(tokens, 16, cache=cache))
    print(f"prompt keys, hashed                {hashed:8.1f} µs")
    print(f"prompt keys, from the key cache    {cached:8.1f} µs")

    words = " ".join(f"w{t}" for t in tokens[:args.tokens // 2])   # a word and a space: two simulated tokens
    payload = {"model": "demo", "messages": [{"role": "user", "content": words}]}
    health = HealthView(backends={})
    for enabled in ("false", "true"):
        snapshot = load_text(CONFIG.format(enabled=enabled, entries=args.entries), env={}).snapshot
        pool = BackendPool(snapshot, kv_index=index)
        call = Call(model="demo", stream=False, body=json.dumps(payload).encode(), payload=payload,
                    snapshot=snapshot)
        us = best_of(args.rounds, 50, lambda: pool.choose(call, "demo", health, {}, 1.0))   # noqa: B023
        print(f"BackendPool.choose, index {'on ' if enabled == 'true' else 'off'}      {us:8.1f} µs per pick")


if __name__ == "__main__":
    main()
