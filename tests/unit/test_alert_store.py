"""The alerts table on SQLite and PostgreSQL: one claim per alert across connections, statuses, the listing."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from switchyard.actors.alerts.records import Alert
from switchyard.protocol.stores.alerts import SqlAlertStore
from switchyard.protocol.stores.postgresql import PostgresStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests import postgres

pg_server, pg_url = postgres.pg_server, postgres.pg_url

T0 = 1_796_000_000.25


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SqlAlertStore]]:
    """Alert stores on one fresh database, each its own connection (two workers)."""
    made: list[SqlAlertStore] = []
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None

    def make() -> SqlAlertStore:
        store = SqlAlertStore(SqliteStore(tmp_path / "usage.db") if url is None else PostgresStore(url, max_size=2))
        store.open()
        made.append(store)
        return store
    yield make
    for store in made:
        store.close()


def alert(owner_id: str = "team-a", threshold: float = 0.8, event: str = "budget.threshold") -> Alert:
    return Alert(event, "key", owner_id, "month:2026-11", threshold, T0, {"unit": "usd", "spent_usd": 8.5})


def test_an_alert_is_claimed_once_across_connections_and_keeps_its_status(stores):
    one, two = stores(), stores()
    seq = one.claim(alert())
    assert seq is not None and two.claim(alert()) is None
    assert two.claim(alert(threshold=1.0)) is not None    # another fraction is another alert
    one.update(seq, "pending", 2, "http://x: answered HTTP 503", T0 + 1)
    two.update(seq, "delivered", 3, None, T0 + 3)
    newest, first = two.list({}, 10)
    assert (newest.threshold, first.seq) == (1.0, seq)
    assert (first.status, first.attempts, first.last_error, first.updated_at) == ("delivered", 3, None, T0 + 3)
    assert (first.created_at, first.details) == (T0, {"unit": "usd", "spent_usd": 8.5})


def test_the_listing_filters_by_event_owner_and_status(stores):
    store = stores()
    store.claim(alert("a"))
    store.claim(alert("b", 0.0, "key.revoked"))
    assert [a.owner_id for a in store.list({"event": "key.revoked"}, 10)] == ["b"]
    assert [a.owner_id for a in store.list({"owner_id": "a", "status": "pending"}, 10)] == ["a"]
    assert store.list({"status": "failed"}, 10) == []
    assert len(store.list({}, 1)) == 1


def test_a_stale_pending_alert_is_taken_over_by_exactly_one_connection(stores):
    one, two = stores(), stores()
    stale_seq = one.claim(alert("stale"))
    fresh_seq = one.claim(alert("fresh"))
    done_seq = one.claim(alert("done"))
    assert None not in (stale_seq, fresh_seq, done_seq)
    one.update(fresh_seq, "pending", 1, "x", T0 + 100)
    one.update(done_seq, "delivered", 1, None, T0)
    [seen] = two.stale(T0 + 50, 10)
    [seen_too] = one.stale(T0 + 50, 10)
    assert (seen.owner_id, seen.seq, seen.updated_at) == ("stale", stale_seq, T0)
    assert two.take(seen, T0 + 60) and not one.take(seen_too, T0 + 61)   # the row changed since it was read
    assert one.stale(T0 + 50, 10) == []


def test_prune_deletes_alerts_created_before_the_instant_but_the_kept_bucket(stores):
    store = stores()
    store.claim(alert("old"))
    store.claim(Alert("budget.threshold", "key", "forever", "total:total", 0.8, T0, {}))
    store.claim(Alert("budget.threshold", "key", "new", "month:2026-12", 0.8, T0 + 10, {}))
    assert store.prune(T0 + 5, "total:total") == 1
    assert sorted(a.owner_id for a in store.list({}, 10)) == ["forever", "new"]
