"""EngineStatsPoller: reads each engine's Prometheus page on an interval.

With ``engine_stats.enabled``, every enabled backend that runs an engine --
type ``vllm`` or ``sglang``, a simulated backend with ``simulation.engine``,
or any backend with an explicit ``engine_stats_url`` -- gets its own poll
loop: ``GET engine_stats_url`` (else ``url`` + ``engine_stats.path``) under
``engine_stats.timeout``, every ``engine_stats.interval`` from the start of
the previous poll. One loop per backend, so a slow engine never delays the
others.

Published, each replaced wholesale on change (readers never see half an
update): ``view`` (backend -> its latest ``EngineSnapshot``), ``throughput``
(backend -> ``ThroughputSample``, what ``:nitro`` ranks by) and ``status``
(backend -> ``PollStatus`` for admin views). A failed poll changes only the
status: the old snapshot stays and ages, so readers judge freshness by
``age()`` against their own limit. Disabled: no loop, empty views.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Any, Mapping
from urllib.parse import urlsplit

import attrs
import httpx
import trio
from attrs import frozen

from switchyard.actors.addressing import auth_headers, join_url
from switchyard.actors.ports import Upstream
from switchyard.actors.routing.engine_metrics import EngineSnapshot, parse_exposition, throughput
from switchyard.actors.routing.variants import ThroughputSample
from switchyard.config.kinds import kind_of
from switchyard.config.kinds.base import EnginePage
from switchyard.config.schema import BackendConfig, Snapshot
from switchyard.config.telemetry import EngineStatsConfig

MAX_PAGE_BYTES = 16 * 1024 * 1024   # engine pages are hundreds of KB; more is not a metrics page

log = logging.getLogger("switchyard.engine_stats")

_DEFAULT_PORTS = {"http": 80, "https": 443}


@frozen
class PollStatus:
    """How polling one backend's engine page goes (times on the trio clock)."""

    url: str
    polls: int = 0
    failures: int = 0
    last_poll: float | None = None       # when the latest poll ended, either way
    last_success: float | None = None
    last_error: str | None = None        # the latest poll's error; None once a poll succeeds


def polled(backend: BackendConfig) -> bool:
    """Whether ``backend`` has an engine page to read (enabled backends only)."""
    if not backend.enabled:
        return False
    page = kind_of(backend).engine_page   # without engine_stats_url: the kind's (vllm, sglang; a simulated engine)
    if backend.engine_stats_url or page is EnginePage.ALWAYS:
        return True
    return page is EnginePage.SIMULATED and backend.simulation is not None and backend.simulation.engine is not None


def stats_url(backend: BackendConfig, cfg: EngineStatsConfig) -> str:
    return backend.engine_stats_url or join_url(backend.url, cfg.path)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or _DEFAULT_PORTS.get(parts.scheme)


def stats_headers(backend: BackendConfig, url: str) -> list[tuple[str, str]]:
    """The backend's key goes only to its own origin: an ``engine_stats_url`` elsewhere gets none."""
    return auth_headers(backend) if _origin(url) == _origin(join_url(backend.url, "/")) else []


def _target(backend: BackendConfig, cfg: EngineStatsConfig) -> tuple[Any, ...]:
    return stats_url(backend, cfg), backend.url, backend.api_key


class EngineStatsPoller:
    name = "engine_stats"

    def __init__(self, snapshot: Snapshot, upstream: Upstream) -> None:
        self.snapshot = snapshot
        self.upstream = upstream
        self.view: Mapping[str, EngineSnapshot] = MappingProxyType({})
        self.throughput: Mapping[str, ThroughputSample] = MappingProxyType({})
        self.status: Mapping[str, PollStatus] = MappingProxyType({})
        self.targets = self._select(snapshot)
        self._loops: dict[str, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    @staticmethod
    def _select(snapshot: Snapshot) -> dict[str, BackendConfig]:
        if not snapshot.engine_stats.enabled:
            return {}
        return {b.name: b for b in snapshot.backends if polled(b)}

    # --- what readers ask ----------------------------------------------------------

    def age(self, backend: str, now: float) -> float | None:
        """Seconds since ``backend``'s snapshot was taken; None when there is none."""
        snap = self.view.get(backend)
        return None if snap is None else snap.age(now)

    def throughput_view(self) -> Mapping[str, ThroughputSample]:
        return self.throughput

    # --- lifecycle -------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        # No first round before `started`: an engine page is a hint, and a slow
        # one must not hold up the server becoming ready.
        try:
            async with trio.open_nursery() as nursery:
                self._nursery, self._loops = nursery, {}   # a restart after a crash starts clean
                self._sync_loops(restart=())
                task_status.started(self)
                await trio.sleep_forever()   # poll loops come and go with reconfigure()
        finally:
            self._nursery = None

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A new revision: new engines are polled at once, removed ones forgotten.

        A backend whose page address or key changed starts over (its old
        snapshot describes another engine). A new interval restarts every
        loop, so the new cadence holds from the reload on; snapshots stay.
        A new timeout applies from each loop's next poll.
        """
        old_cfg, new_cfg = self.snapshot.engine_stats, snapshot.engine_stats
        old, new = self.targets, self._select(snapshot)
        changed = {n for n in old.keys() & new.keys() if _target(old[n], old_cfg) != _target(new[n], new_cfg)}
        keep = new.keys() - changed
        self.snapshot = snapshot
        self.targets = new
        self.view = MappingProxyType({n: s for n, s in self.view.items() if n in keep})
        self.throughput = MappingProxyType({n: s for n, s in self.throughput.items() if n in keep})
        self.status = MappingProxyType({n: s for n, s in self.status.items() if n in keep})
        self._sync_loops(restart=set(new) if old_cfg.interval != new_cfg.interval else changed)

    def _sync_loops(self, restart: Any) -> None:
        if self._nursery is None:
            return   # not running yet: run() starts the loops
        for name in list(self._loops):
            if name not in self.targets or name in restart:
                self._loops.pop(name).cancel()
        for name, backend in self.targets.items():
            if name not in self._loops:
                scope = self._loops[name] = trio.CancelScope()
                self._nursery.start_soon(self._poll_loop, backend, scope)

    async def _poll_loop(self, backend: BackendConfig, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                cfg = self.snapshot.engine_stats   # re-read: the timeout changes live
                began = trio.current_time()       # a fixed cadence: a slow poll does not push the next
                await self.poll(backend, cfg)
                await trio.sleep_until(began + cfg.interval)

    # --- one poll ----------------------------------------------------------------------

    async def poll(self, backend: BackendConfig, cfg: EngineStatsConfig) -> EngineSnapshot | None:
        """Read ``backend``'s page once and publish the outcome; the new snapshot, or None on failure."""
        url = stats_url(backend, cfg)
        snap: EngineSnapshot | None = None
        error: str | None = None
        with trio.move_on_after(cfg.timeout):
            try:
                response = await self.upstream.client.get(url, headers=stats_headers(backend, url))
                if not response.is_success:
                    error = f"HTTP {response.status_code}"
                elif len(response.content) > MAX_PAGE_BYTES:
                    error = f"the page is over {MAX_PAGE_BYTES} bytes"
                else:
                    snap = parse_exposition(response.text, trio.current_time())
                    if snap is None:
                        error = "no vLLM or SGLang queue metrics on the page"
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            except ValueError as exc:      # a malformed page
                error = str(exc)
            except Exception as exc:       # whatever else a page does, it fails this poll, not the poller
                log.exception("engine page of backend %s could not be read", backend.name)
                error = f"{type(exc).__name__}: {exc}"
        if snap is None and error is None:
            error = f"no answer within {cfg.timeout:g}s"
        self._record(backend.name, url, snap, error)
        return snap

    def _record(self, name: str, url: str, snap: EngineSnapshot | None, error: str | None) -> None:
        if name not in self.targets:
            return   # dropped by a reload while the poll was out
        now = trio.current_time()
        before = self.status.get(name) or PollStatus(url)
        if snap is not None:
            rate = throughput(self.view.get(name), snap)
            self.view = MappingProxyType({**self.view, name: snap})
            if rate is not None:
                sample = ThroughputSample(rate, snap.observed_at)
                self.throughput = MappingProxyType({**self.throughput, name: sample})
            after = attrs.evolve(before, polls=before.polls + 1, last_poll=now, last_success=now, last_error=None)
            if before.last_error is not None:
                log.info("engine stats of %s: polling %s again", name, url)
        else:
            after = attrs.evolve(before, polls=before.polls + 1, failures=before.failures + 1, last_poll=now,
                                 last_error=error)
            if before.last_error is None:   # once per run of failures, not every interval
                log.warning("engine stats of %s: poll of %s failed (%s); keeping the last snapshot",
                            name, url, error)
        self.status = MappingProxyType({**self.status, name: after})
