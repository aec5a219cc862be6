"""The batch store's contract (``actors/batches/store.py``), the same tests on memory, SQLite and PostgreSQL.

Each SQL test opens its stores on one fresh database, each store its own
connection: two of them are two workers (of one instance or of a fleet).
The memory store is one worker's, so its "two workers" share it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs
import psycopg
import pytest

from switchyard.actors.batches.records import (
    CANCELLED,
    CANCELLING,
    COMPLETED,
    DONE,
    ERROR,
    IN_PROGRESS,
    PENDING,
    VALIDATING,
    Batch,
    Line,
    StoredFile,
)
from switchyard.actors.batches.store import BatchStore
from switchyard.actors.ledger.record import StoreUnavailable
from switchyard.config.batches import BatchesConfig
from switchyard.config.usage import UsageConfig
from switchyard.protocol.stores.batches import SqlBatchStore, open_batch_store
from switchyard.protocol.stores.batches_memory import MemoryBatchStore
from switchyard.protocol.stores.postgresql import PostgresStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests import postgres

pg_server, pg_url = postgres.pg_server, postgres.pg_url

T0 = 1_796_000_000.0
INLINE = 64   # bytes a file may have and stay in its row (the tests' batches.inline_bytes)

Stores = Callable[[], BatchStore]


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Stores on one fresh database, each its own connection (a worker); memory: the one store."""
    made: list[BatchStore] = []
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    memory = MemoryBatchStore()

    def make() -> BatchStore:
        if request.param == "memory":
            return memory
        db = SqliteStore(tmp_path / "usage.db", busy_timeout=3) if url is None else PostgresStore(url, max_size=2)
        store = SqlBatchStore(db, tmp_path / "files", INLINE)
        store.open()
        made.append(store)
        return store
    yield make
    for store in made:
        store.close()


def stored(owner: str = "key-a", at: float = T0, file_id: str | None = None, purpose: str = "batch",
           size: int = 10) -> StoredFile:
    return StoredFile(file_id or f"file-{at:.0f}-{owner}", owner, purpose, "in.jsonl", size, at, lines=2)


def batch(batch_id: str = "batch_1", owner: str = "key-a", at: float = T0, status: str = VALIDATING,
          total: int = 3, **more: Any) -> Batch:
    return Batch(batch_id, owner, "/v1/chat/completions", "file-1", "24h", status, at, at + 86_400, total=total,
                 metadata={"team": "a"}, **more)


def lines(batch_id: str = "batch_1", count: int = 3) -> list[Line]:
    return [Line(batch_id, n, f"req-{n}", "/v1/chat/completions", f'{{"model": "m", "n": {n}}}')
            for n in range(1, count + 1)]


def finished(line: Line, status: str = DONE) -> Line:
    return attrs.evolve(line, status=status, result=f'{{"custom_id": "{line.custom_id}"}}')


def test_a_key_sees_only_its_own_files_and_batches(stores):
    store = stores()
    mine = stored("key-a", file_id="file-a")
    store.add_file(mine, b'{"a": 1}\n')
    store.add_batch(batch(owner="key-a"), lines())
    assert store.file("key-a", "file-a") == mine and store.file(None, "file-a") == mine
    assert store.file("key-b", "file-a") is None and store.files("key-b", None, None, 10) == []
    assert store.batch("key-b", "batch_1") is None and store.batches("key-b", None, 10) == []
    assert store.cancel("key-b", "batch_1", T0 + 1) is None
    assert store.batch("key-a", "batch_1").status == VALIDATING   # the other key's cancel changed nothing
    assert not store.delete_file("key-b", "file-a") and store.content("file-a") == b'{"a": 1}\n'
    assert store.batch(None, "batch_1").metadata == {"team": "a"}


def test_a_batch_and_its_lines_come_back_as_written(stores):
    store = stores()
    kept = batch(errors=({"code": "x", "message": "m", "line": 2, "param": None},), times={"in_progress_at": T0 + 1},
                 model="m")
    store.add_batch(kept, lines(count=5))
    assert store.batch("key-a", "batch_1") == kept
    assert [n.number for n in store.lines("batch_1", PENDING, 0, 10)] == [1, 2, 3, 4, 5]
    assert store.lines("batch_1", PENDING, 2, 2) == lines(count=5)[2:4]
    assert store.lines("batch_1", DONE, 0, 10) == [] and store.lines("batch_2", PENDING, 0, 10) == []


def test_files_page_in_either_order_by_purpose_past_after(stores):
    store = stores()
    for i in range(5):
        store.add_file(stored(at=T0 + i, file_id=f"file-{i}", purpose="batch_output" if i == 2 else "batch"), b"x")
    store.add_file(stored("key-b", T0 + 9, "file-other"), b"x")
    ids = lambda files: [f.id for f in files]   # noqa: E731
    assert ids(store.files("key-a", None, None, 10)) == ["file-4", "file-3", "file-2", "file-1", "file-0"]
    assert ids(store.files("key-a", None, None, 10, newest_first=False)) == [f"file-{i}" for i in range(5)]
    assert ids(store.files("key-a", "batch", "file-3", 2)) == ["file-1", "file-0"]
    assert ids(store.files("key-a", None, "file-1", 10, newest_first=False)) == ["file-2", "file-3", "file-4"]
    assert ids(store.files("key-a", "batch_output", None, 10)) == ["file-2"]
    assert store.files("key-a", None, "file-other", 10) == []   # another key's id is no place in this list
    assert store.files("key-a", None, "file-nope", 10) == []


def test_files_of_one_instant_page_by_id(stores):
    store = stores()
    for name in ("file-b", "file-a", "file-c"):
        store.add_file(stored(file_id=name), b"x")
    assert [f.id for f in store.files("key-a", None, "file-c", 10)] == ["file-b", "file-a"]
    assert [f.id for f in store.files("key-a", None, "file-a", 10, newest_first=False)] == ["file-b", "file-c"]


def test_batches_page_newest_first_past_after(stores):
    store = stores()
    for i in range(4):
        store.add_batch(batch(f"batch_{i}", at=T0 + i), lines(f"batch_{i}", 1))
    store.add_batch(batch("batch_other", owner="key-b", at=T0 + 9), [])
    assert [b.id for b in store.batches("key-a", None, 2)] == ["batch_3", "batch_2"]
    assert [b.id for b in store.batches("key-a", "batch_2", 10)] == ["batch_1", "batch_0"]
    assert store.batches("key-a", "batch_other", 10) == []


def test_one_of_two_workers_claiming_together_gets_the_batch(stores):
    one, two = stores(), stores()
    one.add_batch(batch(), lines())
    barrier = threading.Barrier(2)
    got: dict[str, Batch | None] = {}

    def claim(store: BatchStore, worker: str) -> None:
        barrier.wait()
        got[worker] = store.claim(worker, T0, T0 + 30)
    threads = [threading.Thread(target=claim, args=(s, w)) for s, w in ((one, "w1"), (two, "w2"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    winners = [w for w, b in got.items() if b is not None]
    assert len(got) == 2 and len(winners) == 1
    assert got[winners[0]].lease_owner == winners[0] and got[winners[0]].lease_until == T0 + 30
    assert one.batch(None, "batch_1").lease_owner == winners[0]


def test_three_workers_claiming_two_batches_together_take_one_each(stores):
    workers = [(stores(), f"w{i}") for i in range(3)]
    workers[0][0].add_batch(batch("batch_1", at=T0), lines("batch_1"))
    workers[0][0].add_batch(batch("batch_2", at=T0 + 1), lines("batch_2"))
    barrier = threading.Barrier(3)
    got: dict[str, Batch | None] = {}

    def claim(store: BatchStore, worker: str) -> None:
        barrier.wait()
        got[worker] = store.claim(worker, T0, T0 + 30)
    threads = [threading.Thread(target=claim, args=pair) for pair in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    taken = sorted(b.id for b in got.values() if b is not None)
    assert len(got) == 3 and taken == ["batch_1", "batch_2"]


def test_a_postgresql_claim_passes_a_row_another_worker_is_claiming(pg_url, tmp_path):
    """The oldest batch's row locked by a claim in progress elsewhere: this claim takes the next one at once,
    instead of waiting for that transaction (and then finding the row taken)."""
    store = SqlBatchStore(PostgresStore(pg_url, max_size=1, statement_timeout=2), tmp_path, INLINE)
    store.open()
    try:
        store.add_batch(batch("batch_1", at=T0), lines("batch_1"))
        store.add_batch(batch("batch_2", at=T0 + 1), lines("batch_2"))
        with psycopg.connect(pg_url) as other:
            other.execute("SELECT id FROM batches WHERE id = 'batch_1' FOR UPDATE")
            assert store.claim("w2", T0, T0 + 30).id == "batch_2"
    finally:
        store.close()


def test_workers_claiming_take_the_oldest_runnable_batches_one_each(stores):
    one, two = stores(), stores()
    one.add_batch(batch("batch_new", at=T0 + 2), lines("batch_new"))
    one.add_batch(batch("batch_old", at=T0), lines("batch_old"))
    one.add_batch(batch("batch_done", at=T0 - 5, status=COMPLETED), [])
    one.add_batch(batch("batch_relayed", at=T0 - 5, backend="openai", upstream_id="batch_up"), [])
    assert one.claim("w1", T0, T0 + 30).id == "batch_old"
    assert two.claim("w2", T0, T0 + 30).id == "batch_new"
    assert one.claim("w3", T0, T0 + 30) is None


def test_a_lapsed_lease_is_taken_over_and_the_old_holder_writes_nothing(stores):
    one, two = stores(), stores()
    one.add_batch(batch(), lines())
    assert one.claim("w1", T0, T0 + 30) is not None
    assert two.claim("w2", T0 + 10, T0 + 40) is None        # still w1's
    assert two.claim("w2", T0 + 30, T0 + 60) is None        # lapses only past its instant
    taken = two.claim("w2", T0 + 31, T0 + 61)
    assert taken is not None and taken.lease_owner == "w2"
    first = lines()[0]
    assert one.renew("batch_1", "w1", T0 + 70) is None
    assert not one.finish_line(finished(first), "w1")
    assert not one.update(attrs.evolve(taken, status=IN_PROGRESS), "w1")
    assert two.finish_line(finished(first), "w2")
    assert two.renew("batch_1", "w2", T0 + 90).lease_until == T0 + 90
    now = two.batch(None, "batch_1")
    assert (now.completed, now.failed, now.status) == (1, 0, VALIDATING)


def test_a_line_is_finished_once_and_counted_once(stores):
    one, two = stores(), stores()
    one.add_batch(batch(), lines())
    one.claim("w1", T0, T0 + 30)
    first, second = lines()[:2]
    assert one.finish_line(finished(first), "w1")
    assert not one.finish_line(finished(first, ERROR), "w1")     # already done
    assert not two.finish_line(finished(second), "w2")           # not w2's lease
    assert one.finish_line(finished(second, ERROR), "w1")
    now = one.batch("key-a", "batch_1")
    assert (now.completed, now.failed) == (1, 1)
    assert [n.number for n in one.lines("batch_1", PENDING, 0, 10)] == [3]
    [done] = one.lines("batch_1", DONE, 0, 10)
    assert done == finished(first)
    assert one.lines("batch_1", ERROR, 0, 10) == [finished(second, ERROR)]


def test_release_frees_the_lease_at_once(stores):
    one, two = stores(), stores()
    one.add_batch(batch(), lines())
    one.claim("w1", T0, T0 + 30)
    two.release("batch_1", "w2")                     # not its lease: nothing
    assert two.claim("w2", T0 + 1, T0 + 31) is None
    one.release("batch_1", "w1")
    assert two.claim("w2", T0 + 1, T0 + 31).lease_owner == "w2"


def test_cancel_moves_a_running_batch_to_cancelling_once(stores):
    store = stores()
    store.add_batch(batch(), lines())
    store.add_batch(batch("batch_done", status=COMPLETED), [])
    store.claim("w1", T0, T0 + 30)
    cancelling = store.cancel("key-a", "batch_1", T0 + 5)
    assert (cancelling.status, cancelling.times) == (CANCELLING, {"cancelling_at": T0 + 5})
    assert store.cancel("key-a", "batch_1", T0 + 9).times == {"cancelling_at": T0 + 5}
    assert store.cancel("key-a", "batch_done", T0 + 5).status == COMPLETED
    assert store.batch("key-a", "batch_1") == cancelling


def test_a_cancel_ends_at_once_a_batch_no_worker_has_started(stores):
    store = stores()
    store.add_batch(batch(), lines())
    store.add_batch(batch("batch_lapsed", at=T0 + 1), lines("batch_lapsed"))
    store.claim("w1", T0, T0 + 30)   # the oldest: batch_1; its worker stopped before moving it on
    ended = store.cancel("key-a", "batch_lapsed", T0 + 5)
    assert (ended.status, ended.times) == (CANCELLED, {"cancelling_at": T0 + 5, "cancelled_at": T0 + 5})
    assert store.cancel("key-a", "batch_1", T0 + 31).status == CANCELLED   # its lease lapsed at T0 + 30
    assert store.claim("w2", T0 + 32, T0 + 60) is None   # nothing left to run


def test_purge_deletes_the_expired_files_and_the_lines_of_ended_batches(stores):
    store = stores()
    store.add_file(attrs.evolve(stored(file_id="file-old"), expires_at=T0 + 10), b'{"x": 1}\n')
    store.add_file(attrs.evolve(stored(file_id="file-big", size=200), expires_at=T0 + 10), b"y" * 200)
    store.add_file(attrs.evolve(stored(file_id="file-new"), expires_at=T0 + 99), b'{"x": 2}\n')
    store.add_file(stored(file_id="file-input"), b'{"x": 3}\n')   # no expiry: an upload stays until deleted
    store.add_batch(batch("batch_done", status=COMPLETED), lines("batch_done"))
    store.add_batch(batch(), lines())
    assert store.purge(T0 + 10, 1) == 1 and store.purge(T0 + 10, 100) == 1 and store.purge(T0 + 10, 100) == 0
    assert sorted(f.id for f in store.files("key-a", None, None, 10)) == ["file-input", "file-new"]
    assert store.content("file-big") is None
    assert store.lines("batch_done", PENDING, 0, 10) == [] and len(store.lines("batch_1", PENDING, 0, 10)) == 3


def test_a_file_added_again_under_its_id_replaces_itself(stores):
    store = stores()
    store.add_file(stored(file_id="file-out", size=9), b'{"a": 1}\n')
    store.add_file(stored(file_id="file-out", size=9), b'{"b": 2}\n')
    assert store.content("file-out") == b'{"b": 2}\n'
    assert [f.id for f in store.files("key-a", None, None, 10)] == ["file-out"]


def test_a_cancel_the_runner_has_not_seen_survives_its_update(stores):
    one, two = stores(), stores()
    one.add_batch(batch(), lines())
    claimed = one.claim("w1", T0, T0 + 30)
    two.cancel("key-a", "batch_1", T0 + 1)
    assert one.update(attrs.evolve(claimed, status=IN_PROGRESS, times={"in_progress_at": T0 + 2}), "w1")
    now = two.batch(None, "batch_1")
    assert (now.status, now.times) == (CANCELLING, {"in_progress_at": T0 + 2, "cancelling_at": T0 + 1})
    assert one.update(attrs.evolve(claimed, status=CANCELLED, times={"cancelled_at": T0 + 3}), "w1")
    now = two.batch(None, "batch_1")
    assert (now.status, now.times) == (CANCELLED, {"cancelled_at": T0 + 3, "cancelling_at": T0 + 1})


def test_update_writes_what_it_names_and_a_relayed_batch_counts(stores):
    store = stores()
    store.add_batch(batch(), lines())
    store.add_batch(batch("batch_r", backend="openai", upstream_id="batch_up"), [])
    gateway = attrs.evolve(store.batch(None, "batch_1"), status=COMPLETED, output_file_id="file-out", completed=9,
                           times={"completed_at": T0 + 9}, errors=({"code": "c", "message": "m"},))
    assert store.update(gateway, None)
    now = store.batch(None, "batch_1")
    assert (now.status, now.output_file_id, now.completed, now.times) == \
        (COMPLETED, "file-out", 0, {"completed_at": T0 + 9})   # a gateway-run batch's counts are finish_line's
    assert now.errors == ({"code": "c", "message": "m"},) and now.metadata == {"team": "a"}
    relayed = attrs.evolve(store.batch(None, "batch_r"), status=IN_PROGRESS, total=7, completed=3, failed=1)
    assert store.update(relayed, None)
    assert (store.batch(None, "batch_r").completed, store.batch(None, "batch_r").total) == (3, 7)
    assert not store.update(batch("batch_missing"), None)


def test_update_open_writes_a_batch_only_until_it_is_terminal_so_one_writer_ends_it(stores):
    one, two = stores(), stores()
    one.add_batch(batch("batch_r", backend="openai", upstream_id="batch_up"), [])
    seen = one.batch(None, "batch_r")
    assert one.update_open(attrs.evolve(seen, status=IN_PROGRESS, total=4, completed=1))
    ended = attrs.evolve(seen, status=COMPLETED, total=4, completed=4, times={"completed_at": T0 + 9})
    assert one.update_open(ended)
    assert not two.update_open(ended)   # the second writer to see the end: it registers nothing
    assert not two.update_open(attrs.evolve(seen, status=IN_PROGRESS, completed=2))   # a late, older view
    now = two.batch(None, "batch_r")
    assert (now.status, now.completed) == (COMPLETED, 4)
    assert not one.update_open(batch("batch_missing"))


def test_relayed_open_lists_the_relayed_batches_not_yet_terminal_oldest_first(stores):
    store = stores()
    store.add_batch(batch("batch_r2", at=T0 + 2, backend="azure", upstream_id="u2"), [])
    store.add_batch(batch("batch_r1", at=T0 + 1, backend="openai", upstream_id="u1"), [])
    store.add_batch(batch("batch_r0", at=T0, backend="openai", upstream_id="u0", status=COMPLETED), [])
    store.add_batch(batch("batch_g", at=T0), lines("batch_g"))
    assert [b.id for b in store.relayed_open(10)] == ["batch_r1", "batch_r2"]
    assert [b.id for b in store.relayed_open(1)] == ["batch_r1"]


def test_a_relayed_file_has_no_content_here(stores):
    store = stores()
    store.add_file(attrs.evolve(stored(file_id="file-r"), backend="openai", upstream_id="file-up"), None)
    assert store.file("key-a", "file-r").upstream_id == "file-up" and store.content("file-r") is None
    assert store.content("file-nope") is None


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_large_file_lives_on_disk_and_goes_with_its_row(kind, request, tmp_path):
    usage = UsageConfig(ledger="sqlite" if kind == "sqlite" else request.getfixturevalue("pg_url"))
    store = open_batch_store(usage, BatchesConfig(inline_bytes=INLINE, directory="shared"), tmp_path)
    store.open()
    try:
        big, small = b'{"x": "' + b"y" * 200 + b'"}\n', b'{"x": 1}\n'
        store.add_file(stored(file_id="file-big", size=len(big)), big)
        store.add_file(stored(file_id="file-small", size=len(small)), small)
        assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["file-big"]   # no temporary left
        assert (tmp_path / "shared" / "file-big").read_bytes() == big
        assert store.content("file-big") == big and store.content("file-small") == small
        assert store.delete_file("key-a", "file-big") and store.delete_file("key-a", "file-small")
        assert list((tmp_path / "shared").iterdir()) == []
        assert store.file(None, "file-big") is None and store.content("file-big") is None
        assert not store.delete_file("key-a", "file-big")
    finally:
        store.close()


def test_open_batch_store_keeps_memory_for_a_memory_ledger(tmp_path):
    assert isinstance(open_batch_store(UsageConfig(ledger="memory"), BatchesConfig(), tmp_path), MemoryBatchStore)


def test_a_store_whose_server_is_away_fails_within_its_deadline(pg_server, pg_url, tmp_path):
    store = SqlBatchStore(PostgresStore(pg_url, timeout=2, max_size=1, statement_timeout=2), tmp_path, INLINE)
    store.open()
    try:
        pg_server.stop()
        with pytest.raises(StoreUnavailable, match="usage ledger postgresql://"):
            store.batches("key-a", None, 10)
    finally:
        store.close()
