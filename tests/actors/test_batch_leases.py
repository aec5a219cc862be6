"""Two workers on one batch store: a batch is one worker's at a time, a lapsed lease is taken over, and every
line is finished once (actors/batches/runner.py, the store's leases).

Each test runs its own runners on a store of its own, their lines through
one gateway's doors; the gateway's own runner never sees that store.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
import trio

from switchyard.actors.batches.records import COMPLETED, TERMINAL, VALIDATING, Batch, Line
from switchyard.actors.batches.runner import BatchRunner
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.protocol.doors.batch_lines import run_line
from switchyard.protocol.stores.batches_memory import MemoryBatchStore
from tests.actors.batch_support import T0, chat_line, wall
from tests.harness import gateway

# lines of 700 ms, two at a time per worker; a lease of 5 s renewed every second
CONFIG = """
health_checks: {interval: 1h}
usage: {ledger: memory}
batches: {concurrency: 2, poll_interval: 1s, lease: 5s}
backends:
  - {name: a, type: simulated, models: [demo], simulation: {latency: 700ms, chunks: 2}}
"""


class WorkerView:
    """The store as one worker reaches it: ``cut_off`` (once it holds a batch, its renewals and claims fail),
    ``dead`` (it releases nothing)."""

    def __init__(self, store: MemoryBatchStore, *, cut_off: bool = False, dead: bool = False) -> None:
        self.store, self.cut_off, self.dead = store, cut_off, dead
        self.claimed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def claim(self, worker: str, now: float, until: float) -> Any:
        if self.cut_off and self.claimed:
            raise StoreUnavailable("the network between this worker and the store is down")
        batch = self.store.claim(worker, now, until)
        if batch is not None:
            self.claimed.append(batch.id)
        return batch

    def renew(self, batch_id: str, worker: str, until: float) -> Any:
        if self.cut_off:
            raise StoreUnavailable("the network between this worker and the store is down")
        return self.store.renew(batch_id, worker, until)

    def release(self, batch_id: str, worker: str) -> None:
        if not self.dead:
            self.store.release(batch_id, worker)


async def inline(fn: Any, *args: Any, limiter: Any = None) -> Any:
    """A memory store's call, made in the task: no thread whose real time the virtual clock could jump over."""
    return fn(*args)


def runner(app: Any, store: Any, worker: str) -> BatchRunner:
    return BatchRunner(store, lambda: app.runtime.snapshot.batches, worker, functools.partial(run_line, app),
                       clock=wall, to_thread=inline)


def add(store: MemoryBatchStore, batch_id: str, lines: int) -> None:
    now = wall()
    store.add_batch(Batch(batch_id, "", "/v1/chat/completions", "file-1", "24h", VALIDATING, now, now + 86_400,
                          total=lines),
                    [Line(batch_id, n, f"req-{n}", "/v1/chat/completions", json.dumps(chat_line()))
                     for n in range(1, lines + 1)])


async def finished(store: MemoryBatchStore, batch_id: str) -> Any:
    with trio.fail_after(600):
        while (batch := store.batch(None, batch_id)).status not in TERMINAL:
            await trio.sleep(0.01)
    return batch


def output_ids(store: MemoryBatchStore, batch: Any) -> list[str]:
    return [json.loads(line)["custom_id"] for line in store.content(batch.output_file_id).decode().splitlines()]


async def test_two_live_workers_share_the_batches_and_finish_each_line_once(autojump_clock):
    store = MemoryBatchStore()
    one, two = WorkerView(store), WorkerView(store)
    ids = [f"batch_{n:024x}" for n in range(4)]
    for batch_id in ids:
        add(store, batch_id, 5)
    async with gateway(CONFIG) as app, trio.open_nursery() as nursery:
        await nursery.start(runner(app, one, "w1").run)
        await nursery.start(runner(app, two, "w2").run)
        batches = [await finished(store, batch_id) for batch_id in ids]
        nursery.cancel_scope.cancel()
    assert [(b.status, b.completed, b.failed) for b in batches] == [(COMPLETED, 5, 0)] * 4
    assert sorted(one.claimed + two.claimed) == ids and one.claimed and two.claimed
    for batch in batches:
        assert output_ids(store, batch) == [f"req-{n}" for n in range(1, 6)]


async def test_a_dead_workers_batch_is_taken_over_once_its_lease_lapses(autojump_clock):
    store = MemoryBatchStore()
    add(store, "batch_" + "1" * 24, 12)
    async with gateway(CONFIG) as app:
        async with trio.open_nursery() as first:   # claims at 0; pairs end at 0.7, 1.4, 2.1; dies at 2.5
            await first.start(runner(app, WorkerView(store, dead=True), "w1").run)
            await trio.sleep(2.5)
            first.cancel_scope.cancel()
        assert store.batch(None, "batch_" + "1" * 24).completed == 6
        async with trio.open_nursery() as nursery:
            await nursery.start(runner(app, WorkerView(store), "w2").run)
            batch = await finished(store, "batch_" + "1" * 24)
            nursery.cancel_scope.cancel()
    # w1's lease ran to 2 + 5 = 7: w2, polling every second from 2.5, claims at 7.5 and runs lines 7-12 in
    # three rounds of 0.7 s
    assert batch.status == COMPLETED and (batch.completed, batch.failed) == (12, 0)
    assert batch.times["completed_at"] == T0 + 7.5 + 2.1
    assert output_ids(store, batch) == [f"req-{n}" for n in range(1, 13)]


@pytest.mark.simulator_history
async def test_a_worker_cut_off_from_the_store_stops_its_lines_when_its_lease_runs_out(autojump_clock):
    store = MemoryBatchStore()
    add(store, "batch_" + "2" * 24, 24)
    async with gateway(CONFIG) as app, trio.open_nursery() as nursery:
        sim = app.runtime.upstream.simulated["a.simulated"]
        cut = WorkerView(store, cut_off=True)
        # w1 claims at 0 (lease to 5) and cannot renew: at 5 it stops its lines in flight, unanswered; w2 claims
        # at 6 and runs every line w1 did not finish
        await nursery.start(runner(app, cut, "w1").run)
        await nursery.start(runner(app, WorkerView(store), "w2").run)
        batch = await finished(store, "batch_" + "2" * 24)
        nursery.cancel_scope.cancel()
    assert batch.status == COMPLETED and (batch.completed, batch.failed) == (24, 0)
    assert output_ids(store, batch) == [f"req-{n}" for n in range(1, 25)]
    assert sim.served == 26   # lines 15 and 16, in flight on w1 at 5, were cut there unanswered and run by w2
    assert cut.claimed == ["batch_" + "2" * 24]
