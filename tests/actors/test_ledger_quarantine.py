"""One value never stalls the ledger: records are made safe, a record the store refuses is quarantined while
the rest go in, the spill file is replayed line by line the same way, and it is bounded by size and age.

The stores are real (SQLite files, a PostgreSQL server of the suite's own) and their calls run in worker
threads, as in production. A record the store refuses (after the values are made safe) is one whose number
no column takes: a token count past a 64-bit integer, as a backend's broken usage could report.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import pytest
import trio

from switchyard.actors.ledger.actor import LedgerActor
from switchyard.actors.ledger.record import LedgerRecord, UsageQuery
from switchyard.actors.ledger.spill import SpillFile
from switchyard.config.usage import DAY, UsageConfig
from switchyard.protocol.stores.postgresql import PostgresStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests import postgres
from tests.actors.test_ledger_actor import WriteLock

pg_server, pg_url = postgres.pg_server, postgres.pg_url   # the fixtures this module uses

ALL = UsageQuery(purpose=None)
NOW = 1_800_000_000.0
HUGE = 2 ** 70   # no store's integer column takes it


def rec(n: int, t: float = NOW, **fields: Any) -> LedgerRecord:
    base: dict[str, Any] = dict(request_id=f"req-{n}", time=t, key_id="k1", organization_id=None, endpoint="chat",
                                model="m", served_model="m", backend="b", attempts=1, status=200, error_code=None,
                                record_id=f"rec-{n}")
    return LedgerRecord(**{**base, **fields})


def usage(**kw: Any) -> UsageConfig:
    return UsageConfig(**{"flush_interval": 0.05, "batch_size": 100, "queue_size": 100, "retention": 0, **kw})


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "usage.db", busy_timeout=0.01)
    url = request.getfixturevalue("pg_url")
    return lambda: PostgresStore(url, timeout=2)


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.01)


def quarantine_of(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "usage-quarantine.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def ids(records: list[LedgerRecord]) -> list[str]:
    return sorted(r.record_id for r in records)


@pytest.mark.parametrize("model", ["demo\ud800", "de\x00mo", "x" * 100_000])
async def test_a_model_name_no_store_can_encode_is_written_made_safe(new_store, nursery, tmp_path, model):
    store = new_store()
    actor = LedgerActor(store, usage(), tmp_path / "spill.jsonl")
    await nursery.start(actor.run)
    actor.record(rec(0, model=model, status=404, error_code="model_not_found"))
    actor.record(rec(1))
    await until(lambda: actor.written == 2)
    [kept, _] = sorted(await actor.records(ALL, 10), key=lambda r: r.record_id)
    assert kept.model == LedgerRecord.from_dict(rec(0, model=model).to_dict()).model
    assert "\ud800" not in kept.model and "\x00" not in kept.model and len(kept.model) <= 257
    assert (actor.spilled, actor.quarantined, actor.store_up) == (0, 0, True)


async def test_a_record_the_store_refuses_is_quarantined_and_the_rest_of_its_batch_written(
        new_store, nursery, tmp_path, caplog):
    store = new_store()
    actor = LedgerActor(store, usage(), tmp_path / "spill.jsonl")
    await nursery.start(actor.run)
    for n in range(5):
        actor.record(rec(n, input_tokens=HUGE) if n == 2 else rec(n))
    await until(lambda: actor.written == 4 and actor.quarantined == 1)
    assert ids(await actor.records(ALL, 10)) == ["rec-0", "rec-1", "rec-3", "rec-4"]
    assert (actor.spilled, actor.write_failures, actor.store_up) == (0, 0, True)
    [entry] = quarantine_of(tmp_path)
    assert entry["record"]["record_id"] == "rec-2" and entry["record"]["input_tokens"] == HUGE
    assert entry["reason"].startswith(f"the {store.name} store refused it: ")
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(logged) == 1 and "record rec-2 of request req-2 quarantined" in logged[0]
    actor.record(rec(5))   # and the ledger goes on
    await until(lambda: actor.written == 5)


async def test_the_spill_is_replayed_line_by_line_past_a_refused_record_and_a_corrupt_line(
        new_store, nursery, tmp_path):
    spill = tmp_path / "spill.jsonl"
    SpillFile(spill).append([rec(0), rec(1, input_tokens=HUGE)])
    with open(spill, "ab") as f:
        f.write(b'{"request_id": "req-x", "time": \xff oops\n')   # neither JSON nor UTF-8
    SpillFile(spill).append([rec(2), rec(3)])
    actor = LedgerActor(new_store(), usage(), spill)
    await nursery.start(actor.run)
    await until(lambda: not spill.exists())
    assert ids(await actor.records(ALL, 10)) == ["rec-0", "rec-2", "rec-3"]
    assert (actor.replayed, actor.quarantined) == (3, 2)
    record, line = quarantine_of(tmp_path)
    assert record["record"]["record_id"] == "rec-1"
    assert line["line"] == '{"request_id": "req-x", "time": \\xff oops'


async def test_a_spill_line_with_a_lone_surrogate_from_an_earlier_build_replays_made_safe(
        new_store, nursery, tmp_path):
    spill = tmp_path / "spill.jsonl"
    line = dict(rec(0).to_dict(), model="demo\ud800")   # json.dumps escapes it, as the spill file did
    spill.write_text(json.dumps(line) + "\n")
    actor = LedgerActor(new_store(), usage(), spill)
    await nursery.start(actor.run)
    await until(lambda: not spill.exists())
    [kept] = await actor.records(ALL, 10)
    assert kept.model == "demo\ufffd" and actor.quarantined == 0


async def test_a_store_that_is_down_spills_a_refused_record_and_quarantines_it_only_once_back(
        nursery, tmp_path, caplog):
    store = SqliteStore(tmp_path / "usage.db", busy_timeout=0.01)
    spill = tmp_path / "spill.jsonl"
    actor = LedgerActor(store, usage(), spill)
    await nursery.start(actor.run)
    lock = WriteLock(store.path)
    lock.take()
    actor.record(rec(0))
    actor.record(rec(1, input_tokens=HUGE))
    await until(lambda: actor.spilled == 2)
    assert (actor.store_up, actor.quarantined) == (False, 0)   # a store that is down refuses everything alike
    lock.release()
    await until(lambda: not spill.exists())
    assert ids(await actor.records(ALL, 10)) == ["rec-0"] and actor.quarantined == 1


async def test_the_spill_file_past_its_bound_drops_and_counts_and_warns_before(nursery, tmp_path, caplog):
    store = SqliteStore(tmp_path / "usage.db", busy_timeout=0.01)
    spill = tmp_path / "spill.jsonl"
    def even(n: int) -> LedgerRecord:   # fixed-width ids: every spill line as long as the first, as counted
        return rec(n, request_id=f"req-{n:05d}", record_id=f"rec-{n:05d}")

    line = len(json.dumps(even(0).to_dict(), separators=(",", ":"))) + 1
    actor = LedgerActor(store, usage(spill_max_bytes=64 * 1024), spill)
    await nursery.start(actor.run)
    lock = WriteLock(store.path)   # held for the whole test: the store stays down
    lock.take()
    fits = 64 * 1024 // line
    warn_at = -(-int(0.8 * 64 * 1024) // line)
    for n in range(warn_at - 1):
        actor.record(even(n))
    await until(lambda: actor.spilled == warn_at - 1)
    assert not [r for r in caplog.records if "% of usage.spill_max_bytes" in r.getMessage()]
    for n in range(warn_at - 1, fits + 10):
        actor.record(even(n))
    await until(lambda: actor.spilled + actor.dropped == fits + 10)
    assert (actor.spilled, actor.dropped) == (fits, 10)
    assert actor.spill_bytes == spill.stat().st_size <= 64 * 1024
    messages = [r.getMessage() for r in caplog.records]
    assert sum("% of usage.spill_max_bytes" in m for m in messages) == 1
    full = [m for m in messages if "is full (usage.spill_max_bytes: 65536 bytes)" in m]
    assert full and full[-1].endswith("record(s) dropped so far") and len(full) <= 5   # at 1, 2, 4, 8 drops


async def test_a_full_spill_file_first_makes_room_by_dropping_what_expired(nursery, tmp_path):
    store = SqliteStore(tmp_path / "usage.db", busy_timeout=0.01)
    spill = tmp_path / "spill.jsonl"
    wall = [NOW]
    actor = LedgerActor(store, usage(spill_max_bytes=64 * 1024, spill_max_age=DAY), spill, clock=lambda: wall[0])
    await nursery.start(actor.run)
    lock = WriteLock(store.path)   # held for the whole test: the store stays down
    lock.take()
    for n in range(100):
        actor.record(rec(n, t=NOW - 2 * DAY))   # older than a day by the time the file is full
    await until(lambda: actor.spilled == 100)
    n = 100
    while actor.expired == 0:   # ten at a time: one refused write to the store spills them together
        for m in range(n, n + 10):
            actor.record(rec(m))
        n += 10
        await until(lambda n=n: actor.spilled + actor.dropped == n)
    assert (actor.expired, actor.dropped) == (100, 0)
    times = [json.loads(line)["time"] for line in spill.read_text().splitlines()]
    assert times and min(times) == NOW


async def test_a_replay_drops_spilled_records_older_than_spill_max_age(nursery, tmp_path, caplog):
    spill = tmp_path / "spill.jsonl"
    SpillFile(spill).append([rec(0, t=NOW - 8 * DAY), rec(1, t=NOW - 6 * DAY)])
    actor = LedgerActor(SqliteStore(tmp_path / "usage.db"), usage(), spill, clock=lambda: NOW)
    await nursery.start(actor.run)
    await until(lambda: not spill.exists())
    assert ids(await actor.records(ALL, 10)) == ["rec-1"]
    assert actor.expired == 1
    assert any("1 spilled record(s) older than usage.spill_max_age (604800 s) dropped while replaying" in r.getMessage()
               for r in caplog.records)


async def test_a_full_spill_file_that_can_free_nothing_is_not_rewritten(nursery, tmp_path):
    store = SqliteStore(tmp_path / "usage.db", busy_timeout=0.01)
    spill = tmp_path / "spill.jsonl"
    actor = LedgerActor(store, usage(spill_max_bytes=64 * 1024), spill)
    await nursery.start(actor.run)
    lock = WriteLock(store.path)   # held for the whole test: the store stays down
    lock.take()
    n = 0
    while actor.dropped == 0:   # ten at a time: one refused write to the store spills them together
        for m in range(n, n + 10):
            actor.record(rec(m))
        n += 10
        await until(lambda n=n: actor.spilled + actor.dropped == n)
    inode = spill.stat().st_ino
    for m in range(n, n + 20):
        actor.record(rec(m))
    await until(lambda: actor.spilled + actor.dropped == n + 20)
    assert spill.stat().st_ino == inode and actor.expired == 0   # refused at once, never rewritten
