"""StoredOwners: a worker's memory first, then the store the workers share (a real SQLite file here)."""

from __future__ import annotations

import trio

from switchyard.actors.stored_owners import Found, StoredOwners
from switchyard.config.stored_responses import StoredResponses
from switchyard.protocol.stores.response_owners import SqlOwnerStore
from switchyard.protocol.stores.sqlite import SqliteStore


def worker(path, max_entries: int = 100, max_age: float = 3600.0, clock=None) -> StoredOwners:
    policy = StoredResponses(max_entries=max_entries, max_age=max_age)
    if clock is None:
        return StoredOwners(policy, SqlOwnerStore(SqliteStore(path)))
    return StoredOwners(policy, SqlOwnerStore(SqliteStore(path)), clock=clock)


async def test_a_remembered_id_is_in_the_store_when_remember_returns(tmp_path):
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


async def test_a_failing_store_fails_no_call_and_memory_still_answers(tmp_path):
    owners = worker(tmp_path / "usage.db")
    await owners.open()
    owners.store.close()   # every store call now fails
    await owners.remember("a", "resp_1", "sim-a")
    assert await owners.backend_of("a", "resp_1") == "sim-a"
    assert await owners.backend_of("a", "resp_other") is None
    assert owners.failures == 2 and not owners.store_up


async def test_a_deleted_id_is_unknown_to_the_other_workers_once_forget_returns(tmp_path):
    one, two = worker(tmp_path / "usage.db"), worker(tmp_path / "usage.db")
    for owners in (one, two):
        await owners.open()
    await one.remember("a", "resp_1", "sim-a")
    await two.forget("a", "resp_1")
    assert await two.backend_of("a", "resp_1") is None
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
