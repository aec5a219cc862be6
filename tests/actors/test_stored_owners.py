"""StoredOwners: a worker's memory first, then the store the workers share (a real SQLite file here)."""

from __future__ import annotations

import pytest
import trio

from switchyard.actors.errors import StoredResponsesUnavailable
from switchyard.actors.owner_writes import Op
from switchyard.actors.ports import Found
from switchyard.actors.stored_owners import StoredOwners
from switchyard.config.stored_responses import StoredResponses
from switchyard.protocol.stores.response_owners import SqlOwnerStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests.actors.test_ledger_actor import WriteLock


def worker(path, max_entries: int = 100, max_age: float = 3600.0, clock=None, busy_timeout: float = 5.0
           ) -> StoredOwners:
    policy = StoredResponses(max_entries=max_entries, max_age=max_age)
    store = SqlOwnerStore(SqliteStore(path, busy_timeout=busy_timeout))
    if clock is None:
        return StoredOwners(policy, store)
    return StoredOwners(policy, store, clock=clock)


async def test_a_remembered_id_is_found_by_another_worker_as_soon_as_remember_returns(tmp_path):
    one, two = worker(tmp_path / "usage.db"), worker(tmp_path / "usage.db")
    async with trio.open_nursery() as nursery:
        for owners in (one, two):
            await nursery.start(owners.run)
        await one.remember("a", "resp_1", "sim-a")
        assert await two.lookup("a", "resp_1") == Found("sim-a", False)
        assert await two.lookup("b", "resp_1") == Found(None, True)
        nursery.cancel_scope.cancel()
    for owners in (one, two):
        await owners.aclose()


async def test_a_workers_own_memory_is_looked_at_first(tmp_path):
    owners = worker(tmp_path / "usage.db")
    await owners.open()
    await owners.remember("a", "resp_1", "sim-a")
    owners.store.db.transact(lambda cur: cur.execute("DELETE FROM stored_response_owners"))
    assert await owners.backend_of("a", "resp_1") == "sim-a"   # the store no longer has it; memory does
    await owners.aclose()


async def test_a_store_that_fails_fails_no_create_and_memory_still_answers(tmp_path):
    owners = worker(tmp_path / "usage.db")
    await owners.open()
    owners.store.close()   # every store call now fails
    async with trio.open_nursery() as nursery:
        await nursery.start(owners.run)
        await owners.remember("a", "resp_1", "sim-a")
        assert await owners.backend_of("a", "resp_1") == "sim-a"   # this worker's memory
        with pytest.raises(StoredResponsesUnavailable):            # never "unknown": the store would know
            await owners.backend_of("a", "resp_other")
        assert not owners.store_up and owners.writes.queued == 1
        nursery.cancel_scope.cancel()


async def test_a_deleted_id_is_unknown_to_its_worker_at_once_and_gone_from_the_store_soon_after(tmp_path):
    one, two = worker(tmp_path / "usage.db"), worker(tmp_path / "usage.db")
    async with trio.open_nursery() as nursery:
        for owners in (one, two):
            await nursery.start(owners.run)
        await one.remember("a", "resp_1", "sim-a")
        assert await two.lookup("a", "resp_1") == Found("sim-a", False)
        await two.forget("a", "resp_1")
        assert await two.lookup("a", "resp_1") == Found(None, False)   # its own queued delete answers
        with trio.fail_after(5):
            while one.store.db._fetch("SELECT COUNT(*) FROM stored_response_owners", []) != [(0,)]:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    for owners in (one, two):
        await owners.aclose()


async def test_run_prunes_the_store_by_its_bounds(tmp_path):
    now = [1000.0]
    owners = worker(tmp_path / "usage.db", max_entries=2, max_age=100.0, clock=lambda: now[0])
    await owners.open()
    for n in range(4):
        now[0] += 10
        await owners.remember("a", f"resp_{n}", "sim-a")
    now[0] += 75   # 1115: resp_0 (1010) is past max_age; of the three left, resp_1 is past max_entries
    async with trio.open_nursery() as nursery:
        await nursery.start(owners.run)   # prunes as it starts
        nursery.cancel_scope.cancel()
    count = owners.store.db.transact(lambda cur: cur.execute(
        "SELECT response_id FROM stored_response_owners ORDER BY seq").fetchall())
    assert [row[0] for row in count] == ["resp_2", "resp_3"] and owners.pruned == 2
    await owners.aclose()


async def test_without_a_store_the_workers_memory_is_the_map():
    owners = StoredOwners(StoredResponses(), None)
    async with trio.open_nursery() as nursery:
        await nursery.start(owners.run)
        await owners.remember("a", "resp_1", "sim-a")
        assert await owners.lookup("a", "resp_1") == Found("sim-a", False)
        assert await owners.lookup("b", "resp_1") == Found(None, True)
        nursery.cancel_scope.cancel()


# --- a store that is away never holds a call -------------------------------------------------------------
# Real SQLite, real threads, the real clock: another connection holds the file's write lock, so a write
# waits the store's own deadline (its busy timeout, 0.5 s here) and fails. The bounds asserted are far from
# both what the old code waited (2 s a create, however many) and what the new one does (one deadline, once).


async def test_no_create_waits_for_a_store_that_is_away_and_its_rows_follow_when_it_is_back(tmp_path):
    one, two = worker(tmp_path / "usage.db", busy_timeout=0.5), worker(tmp_path / "usage.db")
    async with trio.open_nursery() as nursery:
        for owners in (one, two):
            await nursery.start(owners.run)
        lock = WriteLock(tmp_path / "usage.db")
        lock.take()
        began = trio.current_time()
        for n in range(10):
            await one.remember("a", f"resp_{n}", "sim-a")
        assert trio.current_time() - began < 0.4   # told, never waited for (a wait is 0.5 s a create)
        with trio.fail_after(5):   # the writer's try fails within the store's deadline: away
            while one.store_up:
                await trio.sleep(0.01)
        assert one.writes.queued == 10 and await one.lookup("a", "resp_3") == Found("sim-a", False)
        lock.release()
        with trio.fail_after(10):   # the writer's retry takes the queue once the lock is gone
            while not one.store_up or one.writes.queued:
                await trio.sleep(0.05)
        assert await two.lookup("a", "resp_9") == Found("sim-a", False)
        nursery.cancel_scope.cancel()
    for owners in (one, two):
        await owners.aclose()


async def test_a_workers_own_queued_delete_answers_before_the_store_has_it(tmp_path):
    owners = worker(tmp_path / "usage.db")
    async with trio.open_nursery() as nursery:
        await nursery.start(owners.run)
        await owners.remember("a", "resp_1", "sim-a")
        await trio.sleep(0.2)
        owners.memory.forget("a", "resp_1")   # as if this worker had not relayed it: only the store knows
        lock = WriteLock(tmp_path / "usage.db")
        lock.take()   # the delete cannot reach the store
        await owners.forget("a", "resp_1")
        assert await owners.lookup("a", "resp_1") == Found(None, False)
        lock.release()
        nursery.cancel_scope.cancel()


async def test_a_lookup_while_the_store_is_away_fails_at_once_and_memory_still_answers(tmp_path):
    owners = worker(tmp_path / "usage.db", busy_timeout=0.5)
    async with trio.open_nursery() as nursery:
        await nursery.start(owners.run)
        lock = WriteLock(tmp_path / "usage.db")
        lock.take()
        await owners.remember("a", "resp_1", "sim-a")
        with trio.fail_after(5):   # the writer finds the store away
            while owners.store_up:
                await trio.sleep(0.01)
        began = trio.current_time()
        with pytest.raises(StoredResponsesUnavailable) as refused:
            await owners.lookup("a", "resp_other")
        assert trio.current_time() - began < 0.4   # not the store's 0.5 s deadline
        assert refused.value.status == 503 and "usage.ledger" in refused.value.message
        assert await owners.backend_of("a", "resp_1") == "sim-a"
        lock.release()
        nursery.cancel_scope.cancel()


async def test_an_id_no_backend_would_make_is_unknown_without_asking_the_store(tmp_path):
    owners = worker(tmp_path / "usage.db")
    await owners.open()
    owners.store.close()   # a store call would fail: none is made
    assert await owners.lookup("a", "resp\x00x") == Found(None, False)
    assert await owners.lookup("a", "x" * 201) == Found(None, False)
    await owners.remember("a", "resp\ud800", "sim-a")   # this worker's memory only: the store never sees it
    assert owners.writes.queued == 0 and owners.store_up


async def test_queued_rows_are_bounded_by_max_entries_while_the_store_is_away(tmp_path, caplog):
    owners = worker(tmp_path / "usage.db", max_entries=3)
    await owners.open()
    owners.store.close()
    owners.writes.failed(RuntimeError("away"), "write")
    for n in range(5):
        await owners.remember("a", f"resp_{n}", "sim-a")
    assert (owners.writes.queued, owners.writes.dropped) == (3, 2)
    assert any("owner row(s) dropped so far" in r.getMessage() for r in caplog.records)


async def test_a_lone_row_the_store_refuses_is_dropped_and_the_store_stays_up(tmp_path, caplog):
    owners = worker(tmp_path / "usage.db")
    async with trio.open_nursery() as nursery:
        await nursery.start(owners.run)
        await owners.writes.tell(Op("a", "resp_bad", "sim-a", 2 ** 70))   # no column takes that time
        await owners.remember("a", "resp_good", "sim-a")
        with trio.fail_after(5):
            while owners.writes.queued:
                await trio.sleep(0.01)
        assert owners.store_up and (owners.writes.dropped, owners.writes.written) == (1, 1)
        assert await owners.lookup("a", "resp_good") == Found("sim-a", False)
        nursery.cancel_scope.cancel()
    assert any("refused the owner row of resp_bad" in r.getMessage() for r in caplog.records)


async def test_rows_still_queued_when_a_worker_stops_with_the_store_away_are_counted_and_said(tmp_path, caplog):
    owners = worker(tmp_path / "usage.db", busy_timeout=0.2)
    await owners.open()
    async with trio.open_nursery() as nursery:
        await nursery.start(owners.run)
        lock = WriteLock(tmp_path / "usage.db")
        lock.take()
        for n in range(3):
            await owners.remember("a", f"resp_{n}", "sim-a")
        with trio.fail_after(5):
            while owners.store_up:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    await owners.aclose()
    lock.release()
    assert owners.writes.dropped == 3 and owners.writes.queued == 0
    assert any("3 owner row(s) not written" in r.getMessage() for r in caplog.records)
