"""LedgerActor: batches at exact virtual instants, outages spill and replay, nothing is ever lost.

Timing tests run the store's calls on the event loop (``on_the_loop``): under
autojump_clock a worker thread lets the mock clock jump while it runs, so
the instants asserted would drift. The other tests use real worker threads.
Outages are real: another SQLite connection holds the database's write lock
(the tests run as root, so file permissions would not stop the store), and the
store's busy timeout (10 ms of real time) runs out.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from switchyard.actors.ledger.actor import LedgerActor
from switchyard.actors.ledger.record import LedgerRecord, StoreUnavailable, UsageQuery
from switchyard.actors.ledger.spill import SpillFile
from switchyard.config.usage import DAY, UsageConfig
from switchyard.protocol.stores.memory import MemoryStore
from switchyard.protocol.stores.sqlite import SqliteStore

ALL = UsageQuery(purpose=None)
NOW = 1_800_000_000.0   # the wall clock the tests' records are stamped with


def rec(n: int, t: float = NOW) -> LedgerRecord:
    return LedgerRecord(request_id=f"req-{n}", time=t, key_id="k1", organization_id=None, endpoint="chat",
                        model="m", served_model="m", backend="b", attempts=1, status=200, error_code=None,
                        input_tokens=n, record_id=f"rec-{n}")


async def on_the_loop(fn: Callable[..., Any], *args: Any, limiter: trio.CapacityLimiter) -> Any:
    """Runs a blocking store or file call on the event loop, behind the same limiter as a thread would."""
    async with limiter:
        return fn(*args)


def ids(records: list[LedgerRecord]) -> list[str]:
    return sorted(r.record_id for r in records)


def usage(**kw: Any) -> UsageConfig:
    return UsageConfig(**{"flush_interval": 1.0, "batch_size": 100, "queue_size": 100, "retention": 0, **kw})


def sqlite(tmp_path: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "usage.db", busy_timeout=0.01)


class WriteLock:
    """Another connection holding the SQLite file's write lock: the store's writes fail while it is held."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)

    def take(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("ROLLBACK")


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.01)


async def test_record_never_blocks_even_with_a_full_queue(autojump_clock, tmp_path):
    actor = LedgerActor(MemoryStore(), usage(queue_size=2), tmp_path / "spill.jsonl")
    t0 = trio.current_time()
    for n in range(5):   # no actor reads the queue: two fit, three overflow
        assert actor.record(rec(n)) is None
    assert trio.current_time() == t0
    assert actor.queued == 5


async def test_a_full_queue_spills_and_nothing_is_lost(autojump_clock, nursery, tmp_path):
    store = MemoryStore()
    actor = LedgerActor(store, usage(queue_size=2), tmp_path / "spill.jsonl", to_thread=on_the_loop)
    await nursery.start(actor.run)
    for n in range(10):   # told in one go: one handed to the waiting actor, two queued, seven over
        actor.record(rec(n))
    assert actor.queued == 10
    await trio.sleep(1.5)
    assert (actor.written, actor.spilled, actor.replayed) == (3, 7, 7)
    assert ids(store.records(ALL, 100)) == ids([rec(n) for n in range(10)])
    assert actor.queued == 0 and not (tmp_path / "spill.jsonl").exists()


async def test_a_batch_is_written_when_it_reaches_batch_size(autojump_clock, nursery, tmp_path):
    store = MemoryStore()
    actor = LedgerActor(store, usage(batch_size=3, flush_interval=10), tmp_path / "spill.jsonl",
                        to_thread=on_the_loop)
    await nursery.start(actor.run)
    t0 = trio.current_time()
    for n in range(4):
        actor.record(rec(n))
    await wait_all_tasks_blocked()
    assert trio.current_time() == t0
    assert ids(store.records(ALL, 100)) == ["rec-0", "rec-1", "rec-2"]
    assert actor.queued == 1   # the fourth starts the next batch


async def test_a_batch_is_written_flush_interval_after_its_first_record(autojump_clock, nursery, tmp_path):
    store = MemoryStore()
    actor = LedgerActor(store, usage(flush_interval=1.0), tmp_path / "spill.jsonl", to_thread=on_the_loop)
    await nursery.start(actor.run)
    t0 = trio.current_time()
    actor.record(rec(0))
    await trio.sleep(0.6)
    actor.record(rec(1))
    await trio.sleep_until(t0 + 0.999)
    assert store.records(ALL, 100) == []
    await trio.sleep_until(t0 + 1.0)
    await wait_all_tasks_blocked()
    assert trio.current_time() == t0 + 1.0
    assert ids(store.records(ALL, 100)) == ["rec-0", "rec-1"]
    actor.record(rec(2))   # the next batch counts from its own first record
    await trio.sleep(0.999)
    assert actor.written == 2
    await trio.sleep(0.001)
    await wait_all_tasks_blocked()
    assert actor.written == 3


async def test_a_busy_worker_does_not_outrun_its_ledger(autojump_clock, nursery, tmp_path):
    """Ten calls end in each pass of the scheduler (no time passes): the actor takes what is queued in
    one turn, so the records are written as they come (taking one a turn, it had taken about a tenth
    and written none)."""
    store = MemoryStore()
    actor = LedgerActor(store, usage(batch_size=100, queue_size=10_000, flush_interval=60), tmp_path / "spill.jsonl",
                        to_thread=on_the_loop)
    await nursery.start(actor.run)
    t0 = trio.current_time()
    for n in range(1000):
        actor.record(rec(n))
        if n % 10 == 9:
            await trio.lowlevel.checkpoint()
    assert trio.current_time() == t0
    assert actor.written >= 800 and actor.spilled == 0
    await wait_all_tasks_blocked()
    assert actor.written == 1000 and actor.queued == 0
    assert ids(store.records(ALL, 2000)) == ids([rec(n) for n in range(1000)])


async def test_a_store_outage_spills_and_the_spill_is_replayed_when_the_store_is_back(
        autojump_clock, nursery, tmp_path, caplog):
    caplog.set_level(logging.INFO, "switchyard.ledger")
    store = sqlite(tmp_path)
    spill = tmp_path / "spill.jsonl"
    actor = LedgerActor(store, usage(), spill, to_thread=on_the_loop)
    await nursery.start(actor.run)
    lock = WriteLock(store.path)
    actor.record(rec(0))
    await trio.sleep(1.5)
    assert actor.written == 1
    lock.take()
    t0 = trio.current_time()
    actor.record(rec(1))
    await trio.sleep_until(t0 + 1.1)   # the batch failed at t0 + 1: spilled
    assert (actor.store_up, actor.write_failures, actor.spilled) == (False, 1, 1)
    assert spill.exists()
    actor.record(rec(2))               # its own batch spills at t0 + 2.1, the store untried
    await trio.sleep_until(t0 + 2.2)
    assert (actor.write_failures, actor.spilled) == (2, 2)   # the retry at t0 + 1.5 failed too
    lock.release()
    await trio.sleep_until(t0 + 2.499)
    assert actor.store_up is False
    await trio.sleep_until(t0 + 2.5)   # the next retry, 1 s after the last
    await wait_all_tasks_blocked()
    assert (actor.store_up, actor.replayed, actor.write_failures) == (True, 2, 2)
    assert ids(await actor.records(ALL, 100)) == ["rec-0", "rec-1", "rec-2"]
    assert not spill.exists()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "database is locked" in warnings[0].getMessage()
    assert any("is back after 1.5s" in r.getMessage() for r in caplog.records)


async def test_backoff_doubles_to_30_s(autojump_clock, nursery, tmp_path):
    store = sqlite(tmp_path)
    actor = LedgerActor(store, usage(), tmp_path / "spill.jsonl", to_thread=on_the_loop)
    await nursery.start(actor.run)
    lock = WriteLock(store.path)
    lock.take()
    t0 = trio.current_time()
    actor.record(rec(0))
    await trio.sleep_until(t0 + 1.0)   # the batch fails at t0 + 1; then the retries
    await wait_all_tasks_blocked()
    assert actor.write_failures == 1
    retries = []
    for expected in (1.5, 2.5, 4.5, 8.5, 16.5, 32.5, 62.5, 92.5, 122.5):   # waits 0.5, 1, 2 ... 16, 30, 30, 30
        await trio.sleep_until(t0 + expected - 0.001)
        before = actor.write_failures
        await trio.sleep_until(t0 + expected)
        await wait_all_tasks_blocked()
        retries.append((expected, actor.write_failures - before))
    assert retries == [(e, 1) for e, _ in retries]
    assert actor.spilled == 1 and actor.store_up is False
    lock.release()


async def test_a_spill_left_by_an_earlier_run_is_replayed_at_start(nursery, tmp_path):
    spill = tmp_path / "spill.jsonl"
    SpillFile(spill).append([rec(0), rec(1)])
    SpillFile(spill).append([rec(2)])
    store = sqlite(tmp_path)
    store.open()
    store.write([rec(0)])   # an earlier replay got this far before the process died: it is skipped
    actor = LedgerActor(store, usage(), spill)
    await nursery.start(actor.run)
    await until(lambda: not spill.exists())
    assert actor.replayed == 3
    assert ids(await actor.records(ALL, 100)) == ["rec-0", "rec-1", "rec-2"]


async def test_a_torn_last_line_is_quarantined_and_counted(nursery, tmp_path):
    spill = tmp_path / "spill.jsonl"
    SpillFile(spill).append([rec(0), rec(1)])
    with open(spill, "ab") as f:   # a kill -9 in the middle of the next line
        f.write(b'{"request_id":"req-2","time":18000')
    store = MemoryStore()
    actor = LedgerActor(store, usage(), spill)
    await nursery.start(actor.run)
    await until(lambda: not spill.exists())
    assert actor.quarantined == 1
    assert ids(store.records(ALL, 100)) == ["rec-0", "rec-1"]
    [entry] = [json.loads(line) for line in (tmp_path / "usage-quarantine.jsonl").read_text().splitlines()]
    assert entry["line"] == '{"request_id":"req-2","time":18000' and entry["reason"] == "not a whole ledger record"


async def test_a_spill_appended_after_a_torn_line_keeps_its_first_record(nursery, tmp_path):
    spill = tmp_path / "spill.jsonl"
    SpillFile(spill).append([rec(0)])
    with open(spill, "ab") as f:
        f.write(b'{"request_id":"req-1","ti')
    SpillFile(spill).append([rec(2), rec(3)])   # the next run spills before it could replay
    store = MemoryStore()
    actor = LedgerActor(store, usage(), spill)
    await nursery.start(actor.run)
    await until(lambda: not spill.exists())
    assert actor.quarantined == 1
    assert ids(store.records(ALL, 100)) == ["rec-0", "rec-2", "rec-3"]


async def test_flush_writes_everything(autojump_clock, nursery, tmp_path):
    store = MemoryStore()
    actor = LedgerActor(store, usage(queue_size=2, flush_interval=60), tmp_path / "spill.jsonl",
                        to_thread=on_the_loop)
    await nursery.start(actor.run)
    t0 = trio.current_time()
    for n in range(5):   # one handed to the waiting actor, one queued, three over the queue's bound
        actor.record(rec(n))
    await actor.flush()
    assert trio.current_time() == t0   # not a batch's flush_interval later
    assert ids(store.records(ALL, 100)) == ids([rec(n) for n in range(5)])
    assert actor.queued == 0 and actor.spilled == 0


async def test_flush_spills_everything_when_the_store_is_down(nursery, tmp_path):
    store = sqlite(tmp_path)
    spill = tmp_path / "spill.jsonl"
    actor = LedgerActor(store, usage(queue_size=2, flush_interval=60), spill)
    await nursery.start(actor.run)
    lock = WriteLock(store.path)
    lock.take()
    for n in range(5):
        actor.record(rec(n))
    await actor.flush()
    assert actor.queued == 0 and actor.spilled == 5 and actor.store_up is False
    chunk = SpillFile(spill).read(0, 100)
    assert ids(list(chunk.records)) == ids([rec(n) for n in range(5)]) and chunk.done
    lock.release()


async def test_retention_purges_records_older_than_usage_retention(autojump_clock, nursery, tmp_path):
    wall = [NOW]
    store = MemoryStore()
    store.write([rec(0, NOW - 3 * DAY), rec(1, NOW - 2 * DAY + 1), rec(2, NOW)])
    actor = LedgerActor(store, usage(retention=2 * DAY), tmp_path / "spill.jsonl", clock=lambda: wall[0],
                        to_thread=on_the_loop)
    await nursery.start(actor.run)
    await wait_all_tasks_blocked()
    assert ids(store.records(ALL, 100)) == ["rec-1", "rec-2"]   # at start
    wall[0] = NOW + 1.5   # rec-1 is now older than two days, but only the hourly purge sees it
    await trio.sleep(3599)
    assert ids(store.records(ALL, 100)) == ["rec-1", "rec-2"]
    await trio.sleep(1)
    await wait_all_tasks_blocked()
    assert ids(store.records(ALL, 100)) == ["rec-2"] and actor.purged == 2


async def test_retention_0_keeps_everything(autojump_clock, nursery, tmp_path):
    store = MemoryStore()
    store.write([rec(0, 0.0), rec(1, NOW)])
    actor = LedgerActor(store, usage(retention=0), tmp_path / "spill.jsonl", clock=lambda: NOW + 1000 * DAY,
                        to_thread=on_the_loop)
    await nursery.start(actor.run)
    await trio.sleep(3 * 3600)
    assert ids(store.records(ALL, 100)) == ["rec-0", "rec-1"] and actor.purged == 0


async def test_an_unreachable_store_at_start_raises_StoreUnavailable(nursery, tmp_path):
    (tmp_path / "not-a-dir").write_text("a file where the ledger's directory should be")
    store = SqliteStore(tmp_path / "not-a-dir" / "usage.db")
    actor = LedgerActor(store, usage(), tmp_path / "spill.jsonl")
    with pytest.raises(StoreUnavailable, match="not-a-dir"):
        await nursery.start(actor.run)
    assert actor.store_up is False


async def test_the_read_side_asks_the_store(nursery, tmp_path):
    store = sqlite(tmp_path)
    actor = LedgerActor(store, usage(), tmp_path / "spill.jsonl")
    await nursery.start(actor.run)
    actor.record(rec(0, NOW))
    await actor.flush()
    assert [r["requests"] for r in await actor.summary(UsageQuery())] == [1]
    assert ids(await actor.for_request("req-0")) == ["rec-0"]
    with pytest.raises(ValueError, match="limit must be an integer >= 1"):
        await actor.records(ALL, 0)
