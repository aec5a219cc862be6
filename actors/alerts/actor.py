"""The alerts actor: every ``EVERY`` seconds, what crossed a threshold is claimed and sent, off the request path.

Spend is read from the usage ledger's totals, as budgets are seeded from
them: per budget period in use, one ``summary`` grouped by key and one by
organization since the period's UTC start (``budget_periods.bucket_of``),
so at most eight GROUP BY queries over the ledger's time index per round,
whatever the number of keys; a record reaches them once the ledger wrote
it (``usage.flush_interval``). Database keys' revocation and expiry come
from the control plane's view. An alert is claimed by inserting its row
(``AlertStore.claim``): the worker whose insert succeeds sends it
(``deliver.py``). Alerts claimed or found claimed here are remembered, so
the database is asked once per alert per worker, not every round.

A total budget (``period: total``) would need the whole ledger each round:
its spend is instead a base (every record before a mark, ``BASE_LAG``
before the base was read) read again every ``BASE_EVERY``, plus the records
since the mark, on the time index. A pending alert whose row has not been
written for ``deliver.stale_after`` is taken over (``AlertStore.take``) and
sent on; rows older than ``alerts.retention`` are pruned once an hour,
except a total budget's, which are its claims for good.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any, Awaitable, Callable, Iterable, Mapping

import attrs
import trio
from attrs import frozen

from switchyard.actors.alerts import deliver
from switchyard.actors.alerts.records import Alert, AlertStore
from switchyard.actors.control.records import KeyRecord
from switchyard.actors.ledger.record import StoreUnavailable, UsageQuery
from switchyard.actors.routing.alert_rules import crossed
from switchyard.actors.routing.budget_periods import bucket_of
from switchyard.config.alerts import AlertsConfig
from switchyard.config.limits import Budget, Period

log = logging.getLogger("switchyard.alerts")

RECENT_REVOKE = 86_400.0  # a key revoked longer ago than this is not announced (alerts turned on later)
KNOWN_MAX = 100_000       # alerts remembered as claimed; past it the memory starts over (the claim still holds)
LIST_MAX = 1000
BASE_EVERY = 3600.0       # seconds between two reads of a total budget's base
BASE_LAG = 300.0          # seconds before the base's read its mark is: a record written that late still counts
PRUNE_EVERY = 3600.0      # seconds between two prunes of old rows, per worker
STALE_MAX = 100           # stale pending alerts taken over per round, at most
SPEND = ("cost", "input_tokens", "output_tokens")

Summary = Callable[[UsageQuery], Awaitable[list[dict[str, Any]]]]


@frozen
class _Base:
    """A total budget's spend per owner before ``mark``, read at ``read_at``."""

    read_at: float
    mark: float
    rows: Mapping[str | None, Mapping[str, Any]]


@frozen
class Owners:
    """What the alerts are about, read afresh each round: every budget (config and database keys and
    organizations) as (owner, owner id, budget), and the database keys."""

    budgets: tuple[tuple[str, str, Budget], ...] = ()
    keys: tuple[KeyRecord, ...] = ()


class AlertActor:
    name = "alerts"

    def __init__(self, store: AlertStore | None, config: Callable[[], AlertsConfig],
                 owners: Callable[[], Owners], summary: Summary, *,
                 clock: Callable[[], float] = time.time, post: deliver.Post | None = None,
                 to_thread: Any = trio.to_thread.run_sync) -> None:
        self.store = store
        self.config = config
        self.owners = owners
        self.summary = summary
        self.clock = clock
        self._post = post
        self._to_thread = to_thread
        self._calls = trio.CapacityLimiter(2)
        self._known: set[tuple[str, str, str, str, float]] = set()
        self._opened = False      # the store is connected: on the first round with webhooks configured
        self._bases: dict[str, _Base] = {}   # per group (key, org): a total budget's base
        self._pruned_at: float | None = None
        self.claimed = 0          # alerts this worker claimed (and so sent), since start

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with deliver.poster() as posting, trio.open_nursery() as nursery:
            post = self._post or posting
            task_status.started()
            while True:
                try:
                    for alert in await self.evaluate():
                        claimed = await self._claim(alert)
                        if claimed is not None:
                            nursery.start_soon(self._send, claimed, post)
                    for alert in await self.orphans():
                        nursery.start_soon(self._send, alert, post)
                    await self._prune()
                except StoreUnavailable as exc:
                    log.warning("alerts: the store cannot say (%s); trying again in %gs", exc,
                                self.config().interval)
                await trio.sleep(self.config().interval)

    async def evaluate(self) -> list[Alert]:
        """The alerts due now that this worker has not seen claimed (none without webhooks or a store)."""
        config = self.config()
        if self.store is None or not config.enabled:
            return []
        await self._open()
        now, owners = self.clock(), self.owners()
        due = [*await self._budgets(config, owners, now), *_keys(config, owners.keys, now)]
        return [a for a in due if _identity(a) not in self._known]

    async def orphans(self) -> list[Alert]:
        """The pending alerts whose sender stopped (unwritten for ``deliver.stale_after``) that this worker
        took over, to be sent on from their next round."""
        config = self.config()
        if self.store is None or not config.enabled:
            return []
        await self._open()
        now = self.clock()
        stale = await self._call(self.store.stale, now - deliver.stale_after(len(config.webhooks)), STALE_MAX)
        taken = []
        for alert in stale:
            if await self._call(self.store.take, alert, now):
                log.warning("alerts: %s of %s %r was left pending by its sender; sending it on", alert.event,
                            alert.owner, alert.owner_id)
                taken.append(attrs.evolve(alert, updated_at=now))
        return taken

    async def recent(self, filters: Mapping[str, Any], limit: int) -> list[Alert]:
        """The newest alerts first (``AlertStore.list``), for ``GET /admin/alerts``."""
        if self.store is None:
            raise StoreUnavailable("alerts are kept in the usage ledger's database, and usage.ledger is memory")
        await self._open()
        found: list[Alert] = await self._call(self.store.list, filters, min(limit, LIST_MAX))
        return found

    async def aclose(self) -> None:
        if self.store is not None and self._opened:
            self._opened = False
            try:
                await self._call(self.store.close)
            except Exception as exc:
                log.warning("alerts: closing the %s store failed (%s)", self.store.name, exc)

    async def _open(self) -> None:
        """Connect (and migrate, as the ledger does) once; a failure is a ``StoreUnavailable``, tried again
        on the next round."""
        assert self.store is not None
        if not self._opened:
            try:
                await self._call(self.store.open)
            except StoreUnavailable:
                raise
            except Exception as exc:
                raise StoreUnavailable(f"{self.store.name}: {exc}") from None
            self._opened = True

    async def _budgets(self, config: AlertsConfig, owners: Owners, now: float) -> list[Alert]:
        out = []
        totals: dict[tuple[Period, str], dict[str | None, dict[str, Any]]] = {}
        for owner, owner_id, budget in owners.budgets:
            bucket = bucket_of(budget.period, now)
            group = "key" if owner == "key" else "org"
            if (budget.period, group) not in totals:
                totals[budget.period, group] = (
                    await self._total(group, now) if budget.period is Period.TOTAL
                    else _by_owner(group, await self.summary(UsageQuery(since=bucket.start, purpose=None,
                                                                         group_by=group))))
            row = totals[budget.period, group].get(owner_id, {})
            usd = float(row.get("cost") or 0.0)
            tokens = int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0)
            hit = crossed(budget, usd, tokens, config.budget_thresholds)
            if hit is None:
                continue
            threshold, unit = hit
            details = {"unit": unit, "period": budget.period.value, "period_bucket": bucket.name,
                       "spent_usd": round(usd, 6), "spent_tokens": tokens,
                       "limit_usd": budget.limit_usd, "limit_tokens": budget.limit_tokens}
            out.append(Alert("budget.threshold", owner, owner_id, f"{budget.period.value}:{bucket.name}",
                             threshold, now, details))
        return out

    async def _total(self, group: str, now: float) -> dict[str | None, dict[str, Any]]:
        """Spend per owner over the whole ledger: the base (read again past ``BASE_EVERY``) plus the records
        since its mark."""
        base = self._bases.get(group)
        if base is None or not 0 <= now - base.read_at < BASE_EVERY:
            mark = now - BASE_LAG
            rows = await self.summary(UsageQuery(until=mark, purpose=None, group_by=group))
            base = self._bases[group] = _Base(now, mark, _by_owner(group, rows))
        recent = _by_owner(group, await self.summary(UsageQuery(since=base.mark, purpose=None, group_by=group)))
        out = {owner: dict(row) for owner, row in base.rows.items()}
        for owner, row in recent.items():
            into = out.setdefault(owner, {})
            for name in SPEND:
                into[name] = (into.get(name) or 0) + (row.get(name) or 0)
        return out

    async def _prune(self) -> None:
        """Once every ``PRUNE_EVERY``: the rows older than ``alerts.retention`` go, but a total budget's."""
        config, now = self.config(), self.clock()
        if self.store is None or not config.enabled:
            return
        if self._pruned_at is not None and 0 <= now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        total = f"{Period.TOTAL.value}:{bucket_of(Period.TOTAL, now).name}"
        gone = await self._call(self.store.prune, now - config.retention, total)
        if gone:
            log.info("alerts: %d alerts older than %gd pruned", gone, config.retention / 86_400)

    async def _claim(self, alert: Alert) -> Alert | None:
        """``alert`` with its seq when this worker's insert made its row; None when the row was there."""
        assert self.store is not None
        seq = await self._call(self.store.claim, alert)
        if len(self._known) >= KNOWN_MAX:
            self._known.clear()
        self._known.add(_identity(alert))
        if seq is None:
            return None
        self.claimed += 1
        return attrs.evolve(alert, seq=seq)

    async def _send(self, alert: Alert, post: deliver.Post) -> None:
        hooks = [h for h in self.config().webhooks if h.wants(alert.event)]
        store, seq = self.store, alert.seq
        assert store is not None and seq is not None

        async def update(status: str, attempts: int, error: str | None) -> None:
            try:
                await self._call(store.update, seq, status, attempts, error, self.clock())
            except StoreUnavailable as exc:
                log.warning("alerts: alert %d's status (%s) not written: %s", seq, status, exc)

        if not await deliver.deliver(alert, hooks, post, update, first=alert.attempts + 1):
            log.warning("alerts: %s of %s %r not delivered after %d attempts", alert.event, alert.owner,
                        alert.owner_id, deliver.ATTEMPTS)

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._to_thread(fn, *args, limiter=self._calls)


def _by_owner(group: str, rows: list[dict[str, Any]]) -> dict[str | None, dict[str, Any]]:
    name = "key_id" if group == "key" else "organization_id"
    return {row.get(name): row for row in rows}


def _keys(config: AlertsConfig, keys: Iterable[KeyRecord], now: float) -> list[Alert]:
    out = []
    for record in keys:
        if record.revoked_at is not None:
            if now - RECENT_REVOKE <= record.revoked_at <= now:
                out.append(Alert("key.revoked", "key", record.id, _instant(record.revoked_at), 0.0, now,
                                 {"revoked_at": record.revoked_at}))
            continue
        if record.expires_at is not None and now < record.expires_at <= now + config.expiry_notice:
            out.append(Alert("key.expiring", "key", record.id, _instant(record.expires_at), 0.0, now,
                             {"expires_at": record.expires_at, "expires_at_iso": _instant(record.expires_at)}))
    return out


def _instant(at: float) -> str:
    """A key event's bucket: the instant itself (a key revoked again, or given a new expiry, is new)."""
    return dt.datetime.fromtimestamp(at, dt.timezone.utc).isoformat().replace("+00:00", "Z")


def _identity(alert: Alert) -> tuple[str, str, str, str, float]:
    return alert.event, alert.owner, alert.owner_id, alert.bucket, alert.threshold
