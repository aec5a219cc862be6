"""A gateway-run batch never starves interactive calls: with ``batches.concurrency`` below the backend's spare
capacity, the interactive p99 stays within 1.2x of the same load without the batch (issue 42, part 7).

The backend is a simulated engine of six slots (``simulation.max_concurrency``:
past it, requests wait their turn), 100 ms a request. The interactive load is
one call every 50 ms: two slots busy, four spare. Everything runs in virtual
time, so each latency is exact and the p99s are reproducible.
"""

from __future__ import annotations

import math

import pytest
import trio

from switchyard.actors.batches.records import COMPLETED
from tests.actors.batch_support import add_batch, chat_line, ended, virtual
from tests.harness import chat, gateway, request

CONFIG = """
health_checks: {interval: 1h}
usage: {ledger: memory}
batches: {concurrency: BATCH, poll_interval: 1s, lease: 30s}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 100ms, chunks: 2, max_concurrency: 6}}
"""
GAP = 0.05       # seconds between two interactive calls
CALLS = 700      # 35 s of interactive load: longer than the batch takes
LINES = 1000


def config(batch_concurrency: int) -> str:
    return CONFIG.replace("BATCH", str(batch_concurrency))


async def interactive_p99(app, start: float) -> float:
    """The p99 latency of ``CALLS`` chat calls arriving every ``GAP`` from ``start``."""
    latencies: list[float] = []

    async def one(at: float) -> None:
        await trio.sleep_until(at)
        reply = await request(app, "POST", "/v1/chat/completions", chat())
        assert reply.status == 200 and reply.ended_at is not None
        latencies.append(reply.ended_at - at)

    async with trio.open_nursery() as nursery:
        for n in range(CALLS):
            nursery.start_soon(one, start + n * GAP)
    latencies.sort()
    return latencies[math.ceil(0.99 * len(latencies)) - 1]


async def run(batch_concurrency: int | None) -> tuple[float, object]:
    """The interactive p99 with a 1,000-line batch running beside it (None: without), and the batch's end."""
    async with gateway(config(batch_concurrency or 1)) as app:
        virtual(app)
        began = trio.current_time()
        batch_id = add_batch(app, [chat_line(text=f"line {n}") for n in range(LINES)], owner="") \
            if batch_concurrency else None
        p99 = await interactive_p99(app, began + 1.0)   # from the batch's claim (the runner's first poll) on
        batch = await ended(app, batch_id, within=3600) if batch_id else None
    return p99, batch


async def test_a_batch_below_the_spare_capacity_leaves_the_interactive_p99_within_1_2x(autojump_clock):
    alone, _ = await run(None)
    beside, batch = await run(batch_concurrency=3)
    assert alone == pytest.approx(0.1)   # a call is its 100 ms at the backend, nothing more
    assert beside <= 1.2 * alone
    assert batch.status == COMPLETED and (batch.completed, batch.failed) == (LINES, 0)


async def test_a_batch_past_the_spare_capacity_does_slow_interactive_calls(autojump_clock):
    """The capacity model bites: a batch given every slot makes interactive calls wait their turn."""
    alone, _ = await run(None)
    beside, batch = await run(batch_concurrency=6)
    assert beside > 1.2 * alone
    assert batch.status == COMPLETED
