"""BackendHealthActor: active checks, passive reports, one published view.

Each enabled backend gets a check loop (``GET {url}{path}`` under the check
timeout; 2xx is up, 503 is warming, anything else or no answer is a
failure). Requests tell the actor about failures they saw. The pure state
machine in ``actors.routing.health`` decides; this actor only does the I/O and
replaces ``view`` wholesale on every change so readers never lock.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import attrs
import httpx
import trio
from attrs import frozen

from actors.mailbox import Mailbox
from actors.messages import PassiveReport
from actors.routing.health import BackendHealth, HealthState, Outcome, Thresholds, next_check_delay, observe
from config.schema import BackendConfig, Snapshot
from protocol.upstream import Upstream, auth_headers, join_url

log = logging.getLogger("switchyard.health")


@frozen
class HealthView:
    backends: Mapping[str, BackendHealth]
    checks_enabled: bool = True

    def routable(self, name: str) -> bool:
        h = self.backends.get(name)
        return h is None or h.routable

    def count(self, state: HealthState) -> int:
        return sum(1 for h in self.backends.values() if h.state is state)


class BackendHealthActor:
    name = "health"

    def __init__(self, snapshot: Snapshot, upstream: Upstream) -> None:
        self.snapshot = snapshot
        self.upstream = upstream
        self.mailbox: Mailbox[PassiveReport] = Mailbox("health", capacity=4096)
        cfg = snapshot.health_checks
        self.thresholds = Thresholds(unhealthy=cfg.unhealthy_threshold, healthy=cfg.healthy_threshold)
        self.view = HealthView({b.name: BackendHealth() for b in snapshot.backends if b.enabled},
                               checks_enabled=cfg.enabled)

    def report(self, report: PassiveReport) -> None:
        if self.view.checks_enabled:
            self.mailbox.tell(report)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            if self.view.checks_enabled:
                for b in self.snapshot.backends:
                    if b.enabled:
                        nursery.start_soon(self._check_loop, b)
            task_status.started(self)
            async for msg in self.mailbox.inbox:
                self._record(msg.backend, Outcome.OK if msg.ok else Outcome.FAIL, msg.error, passive=True)

    async def _check_loop(self, backend: BackendConfig) -> None:
        cfg = self.snapshot.health_checks
        url = join_url(backend.url, cfg.path_for(backend))
        headers = auth_headers(backend)
        while True:
            began = trio.current_time()  # a fixed cadence: a slow check does not push the next one
            outcome, error = await self._check(backend.name, url, headers, cfg.timeout)
            self._record(backend.name, outcome, error)
            await trio.sleep_until(began + next_check_delay(self.view.backends[backend.name], cfg.interval,
                                                            cfg.warmup_check_interval))

    async def _check(self, name: str, url: str, headers: list[tuple[str, str]],
                     timeout: float) -> tuple[Outcome, str | None]:
        with trio.move_on_after(timeout):
            try:
                response = await self.upstream.client.get(url, headers=headers)
            except httpx.HTTPError as exc:
                return Outcome.FAIL, f"{type(exc).__name__}: {exc}"
            if response.is_success:
                return Outcome.OK, None
            if response.status_code == 503:
                return Outcome.WARMING, "HTTP 503 (warming up)"
            return Outcome.FAIL, f"HTTP {response.status_code}"
        return Outcome.FAIL, f"no answer within {timeout:g}s"

    def _record(self, name: str, outcome: Outcome, error: str | None, passive: bool = False) -> None:
        before = self.view.backends.get(name)
        if before is None:
            return
        after = observe(before, outcome, trio.current_time(), self.thresholds, error)
        if after == before:
            return
        if after.state is not before.state:
            level = logging.INFO if after.routable else logging.WARNING
            log.log(level, "backend %s: %s -> %s (%s%s)", name, before.state.value, after.state.value,
                        "passive: " if passive else "", error or "ok")
        self.view = attrs.evolve(self.view, backends={**self.view.backends, name: after})
