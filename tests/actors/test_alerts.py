"""Budget and key alerts (issue 39, part 7) against a real HTTP receiver on 127.0.0.1: sent once per
crossing for the fleet, in each webhook's shape, retried with backoff. Virtual time (autojump_clock):
the wall clock the actor reads is ``BASE`` plus trio's clock."""

from __future__ import annotations

from typing import Any

import trio

from switchyard.actors.alerts import deliver
from switchyard.actors.alerts.actor import AlertActor, Owners
from switchyard.actors.alerts.records import Alert
from switchyard.actors.control.records import KeyRecord
from switchyard.actors.ledger.record import LedgerRecord
from switchyard.config.access import ApiKey
from switchyard.config.alerts import AlertsConfig, AlertWebhook
from switchyard.config.limits import Budget, Period
from switchyard.protocol.stores.alerts import SqlAlertStore
from switchyard.protocol.stores.sqlite import SqliteStore
from tests.webhooks import Receiver

BASE = 1_796_000_000.0   # 2026-11-30T... UTC: the month's bucket is 2026-11
DAY = 86_400.0


def wall() -> float:
    return BASE + trio.current_time()


def spend(ledger: SqliteStore, key: str, cost: float, at: float = BASE, org: str | None = None) -> None:
    ledger.write([LedgerRecord(request_id=f"r{cost}{at}", time=at, key_id=key, organization_id=org,
                               endpoint="chat", model="m", served_model="m", backend="b", attempts=1,
                               status=200, error_code=None, input_tokens=10, output_tokens=10, cost=cost,
                               record_id=f"rec-{key}-{cost}-{at}")])


def stores(tmp_path) -> tuple[SqliteStore, SqlAlertStore]:
    ledger = SqliteStore(tmp_path / "usage.db")
    ledger.open()
    alerts = SqlAlertStore(SqliteStore(tmp_path / "usage.db", busy_timeout=2.0))
    alerts.open()
    return ledger, alerts


async def inline(fn, *args, limiter=None):
    """The store's calls run in the test's thread: a worker thread would let the autojump clock jump ahead
    while it runs, and the instants asserted would drift."""
    return fn(*args)


def actor(ledger: SqliteStore, alerts: SqlAlertStore, config: AlertsConfig, owners: Owners) -> AlertActor:
    async def summary(query):
        return ledger.summary(query)
    return AlertActor(alerts, lambda: config, lambda: owners, summary, clock=wall, to_thread=inline)


KEY_BUDGET = Owners(budgets=(("key", "team-a", Budget(limit_usd=10.0, period=Period.MONTH)),))


def key_record(key_id: str, **kw: Any) -> KeyRecord:
    return KeyRecord(ApiKey(id=key_id, key=""), prefix="syk_x", digest=key_id.encode(), created_at=BASE - DAY,
                     updated_at=BASE - DAY, **kw)


async def test_80_percent_of_a_key_budget_goes_once_to_each_webhook_in_its_shape(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    spend(ledger, "team-a", 8.5)
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        url = await receiver.start(nursery)
        config = AlertsConfig(webhooks=(
            AlertWebhook(url=f"{url}/json", headers=(("authorization", "Bearer t"),)),
            AlertWebhook(url=f"{url}/slack", format="slack")))
        await nursery.start(actor(ledger, alerts, config, KEY_BUDGET).run)
        await trio.sleep(120)            # twelve rounds
        nursery.cancel_scope.cancel()
    assert [g[1] for g in receiver.got] == ["/json", "/slack"]
    _, _, headers, body = receiver.got[0]
    assert headers["authorization"] == "Bearer t"
    assert body["event"] == "budget.threshold" and body["owner"] == "key" and body["owner_id"] == "team-a"
    assert body["threshold"] == 0.8 and body["unit"] == "usd" and body["spent_usd"] == 8.5
    assert body["bucket"] == "month:2026-11" and body["limit_usd"] == 10.0
    assert receiver.got[1][3] == {"text": "Switchyard: key team-a has spent 80% of its month budget "
                                          "($8.50 of $10.00, period 2026-11)."}
    [row] = alerts.list({}, 10)
    assert (row.status, row.attempts, row.last_error) == ("delivered", 1, None)


async def test_not_sent_again_in_the_same_period_only_at_the_next_threshold(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    spend(ledger, "team-a", 8.5)
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),))
        first = actor(ledger, alerts, config, KEY_BUDGET)
        await nursery.start(first.run)
        await trio.sleep(30)
        # a worker started afresh (nothing remembered) finds the claim taken
        await nursery.start(actor(ledger, alerts, config, KEY_BUDGET).run)
        await trio.sleep(30)
        assert len(receiver.got) == 1
        spend(ledger, "team-a", 2.0, at=BASE + 1)   # 105 %
        await trio.sleep(30)
        nursery.cancel_scope.cancel()
    assert [g[3]["threshold"] for g in receiver.got] == [0.8, 1.0]


async def test_a_receiver_failing_twice_gets_it_on_the_third_attempt(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    spend(ledger, "team-a", 8.5)
    receiver = Receiver(statuses=(500, 503))
    async with trio.open_nursery() as nursery:
        url = await receiver.start(nursery)
        config = AlertsConfig(webhooks=(AlertWebhook(url=f"{url}/T0/B0/secret-part"),))
        await nursery.start(actor(ledger, alerts, config, KEY_BUDGET).run)
        await trio.sleep(1.5)
        [row] = alerts.list({}, 10)
        assert (row.status, row.attempts) == ("pending", 2)
        assert row.last_error == f"{url}: answered HTTP 503"   # the host only: a webhook's path may be secret
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    times = [g[0] for g in receiver.got]
    assert len(times) == 3 and times[1] - times[0] == 1.0 and times[2] - times[1] == 2.0   # backoff 1 s, 2 s
    [row] = alerts.list({}, 10)
    assert (row.status, row.attempts, row.last_error) == ("delivered", 3, None)


async def test_a_revoked_database_key_is_announced(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    owners = Owners(keys=(key_record("gone", revoked_at=BASE - 60), key_record("kept")))
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),))
        await nursery.start(actor(ledger, alerts, config, owners).run)
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    [(_, _, _, body)] = receiver.got
    assert (body["event"], body["owner_id"], body["revoked_at"]) == ("key.revoked", "gone", BASE - 60)


async def test_a_database_key_expiring_within_the_notice_is_announced(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    owners = Owners(keys=(key_record("soon", expires_at=BASE + 3 * DAY),
                          key_record("later", expires_at=BASE + 10 * DAY)))
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery), format="slack"),),
                              expiry_notice=7 * DAY)
        await nursery.start(actor(ledger, alerts, config, owners).run)
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert [g[3] for g in receiver.got] == [{"text": "Switchyard: key soon expires at 2026-12-03T00:53:20Z."}]


async def test_two_workers_on_one_store_crossing_together_send_it_once(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    other = SqlAlertStore(SqliteStore(tmp_path / "usage.db", busy_timeout=2.0))
    other.open()
    spend(ledger, "team-a", 8.5)
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),))
        workers = [actor(ledger, alerts, config, KEY_BUDGET), actor(ledger, other, config, KEY_BUDGET)]
        for w in workers:
            nursery.start_soon(w.run)
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert len(receiver.got) == 1
    assert sorted(w.claimed for w in workers) == [0, 1]
    assert len(alerts.list({}, 10)) == 1


async def test_an_organization_s_token_budget_crossed_in_its_day_is_announced(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    spend(ledger, "k1", 0.0, at=BASE - DAY, org="acme")   # yesterday's 20 tokens: another period
    spend(ledger, "k1", 0.0, org="acme")
    spend(ledger, "k2", 0.0, at=BASE + 1, org="acme")     # 40 of 50 tokens today
    owners = Owners(budgets=(("organization", "acme", Budget(limit_tokens=50, period=Period.DAY)),))
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),))
        await nursery.start(actor(ledger, alerts, config, owners).run)
        await trio.sleep(30)
        nursery.cancel_scope.cancel()
    [(_, _, _, body)] = receiver.got
    assert (body["owner"], body["owner_id"], body["threshold"], body["unit"]) == ("organization", "acme", 0.8, "tokens")
    assert (body["spent_tokens"], body["bucket"]) == (40, "day:2026-11-30")


def left_pending(alerts: SqlAlertStore, attempts: int, written_at: float) -> int:
    """A claim whose sender stopped after ``attempts`` rounds, its row last written at ``written_at``."""
    seq = alerts.claim(Alert("budget.threshold", "key", "team-a", "month:2026-11", 0.8, BASE - 300,
                             {"unit": "usd", "spent_usd": 8.5}))
    assert seq is not None
    alerts.update(seq, "pending", attempts, "http://x: answered HTTP 503", written_at)
    return seq


async def test_a_pending_alert_unwritten_past_stale_after_is_sent_on_from_its_next_round(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    left_pending(alerts, 2, BASE - 10)       # stale (one webhook: 73 s) from BASE + 63
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),))
        await nursery.start(actor(ledger, alerts, config, Owners()).run)
        await trio.sleep(120)
        nursery.cancel_scope.cancel()
    assert deliver.stale_after(1) == 73.0
    assert [(g[0], g[3]["owner_id"]) for g in receiver.got] == [(70.0, "team-a")]   # the first round past it
    [row] = alerts.list({}, 10)
    assert (row.status, row.attempts, row.last_error) == ("delivered", 3, None)


async def test_a_stale_pending_alert_is_taken_over_by_one_of_two_workers(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    other = SqlAlertStore(SqliteStore(tmp_path / "usage.db", busy_timeout=2.0))
    other.open()
    left_pending(alerts, 1, BASE - 600)
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),))
        for store in (alerts, other):
            nursery.start_soon(actor(ledger, store, config, Owners()).run)
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert len(receiver.got) == 1
    [row] = alerts.list({}, 10)
    assert (row.status, row.attempts) == ("delivered", 2)


async def test_alerts_past_their_retention_are_pruned_but_a_total_budgets_are_kept(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    for owner_id, bucket, at in (("old", "month:2026-07", BASE - 100 * DAY),
                                 ("kept-for-good", "total:total", BASE - 400 * DAY),
                                 ("recent", "month:2026-11", BASE - 80 * DAY)):
        alerts.claim(Alert("budget.threshold", "key", owner_id, bucket, 0.8, at, {}))
    config = AlertsConfig(webhooks=(AlertWebhook(url="http://127.0.0.1:9/never"),), retention=90 * DAY)
    async with trio.open_nursery() as nursery:
        await nursery.start(actor(ledger, alerts, config, Owners()).run)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert sorted(a.owner_id for a in alerts.list({}, 10)) == ["kept-for-good", "recent"]


async def test_a_total_budget_reads_the_whole_ledger_once_an_hour_and_the_rest_since_a_mark(tmp_path,
                                                                                            autojump_clock):
    ledger, alerts = stores(tmp_path)
    spend(ledger, "team-a", 4.0, at=BASE - 300 * DAY)    # 40 %: no alert
    queries: list[tuple[float | None, float | None]] = []

    async def summary(query):
        queries.append((query.since, query.until))
        return ledger.summary(query)

    owners = Owners(budgets=(("key", "team-a", Budget(limit_usd=10.0, period=Period.TOTAL)),))
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),))
        worker = AlertActor(alerts, lambda: config, lambda: owners, summary, clock=wall, to_thread=inline)
        await nursery.start(worker.run)
        await trio.sleep(95)
        spend(ledger, "team-a", 4.5, at=wall() - 200)   # written late: before the time it is read at
        await trio.sleep(7_200)
        nursery.cancel_scope.cancel()
    [(at, _, _, body)] = receiver.got
    assert (at, body["threshold"], body["spent_usd"], body["bucket"]) == (100.0, 0.8, 8.5, "total:total")
    whole = [q for q in queries if q[0] is None]
    assert whole == [(None, BASE - 300), (None, BASE + 3_600 - 300), (None, BASE + 7_200 - 300)]
    assert all(since is not None and until is None for since, until in queries if (since, until) not in whole)


async def test_rounds_follow_alerts_interval(tmp_path, autojump_clock):
    ledger, alerts = stores(tmp_path)
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        config = AlertsConfig(webhooks=(AlertWebhook(url=await receiver.start(nursery)),), interval=2.0)
        await nursery.start(actor(ledger, alerts, config, KEY_BUDGET).run)
        await trio.sleep(3)
        spend(ledger, "team-a", 8.5, at=wall())
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert [g[0] for g in receiver.got] == [4.0]
