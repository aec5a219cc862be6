"""BackendHealthActor: active checks, passive circuits, one published view.

Each enabled backend gets a check loop (``GET {url}{path}`` under the check
timeout; 2xx is up, 503 is warming, anything else or no answer is a
failure), except a kind whose every route needs a signed model call
(``Kind.passive_health``: bedrock), which its calls alone judge. Real
calls feed per-(backend, model) circuits: failures that make up enough of
a window's calls, even without its worst callers' failures, take that pair
out of rotation at once, and a half-open probe brings it back. Requests report
synchronously (Trio runs one task at a time, so a report is applied before
anyone can read a stale view, and a half-open circuit admits only the
probes it has room for). The pure state machines in
``actors.routing.health`` and ``actors.routing.circuit`` decide; this actor
does the I/O and replaces ``view`` wholesale whenever what it shows
changes. The windows of closed circuits (their calls, their failures by
caller) are the actor's own and never published, so the successes on a
route where a looping caller keeps a window open replace no view.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import attrs
import httpx
import trio
from attrs import frozen

from switchyard.actors.addressing import auth_headers, join_url
from switchyard.actors.ports import Upstream
from switchyard.actors.routing.circuit import (
    ANONYMOUS,
    CLEAN,
    Circuit,
    CircuitState,
    Policy,
    Window,
    on_failure,
    on_probe,
    on_probe_abandoned,
    on_success,
    proves_nothing,
)
from switchyard.actors.routing.health import (
    BackendHealth,
    HealthState,
    Outcome,
    Thresholds,
    next_check_delay,
    observe,
)
from switchyard.config.kinds import health_path, kind_of
from switchyard.config.schema import BackendConfig, Snapshot

log = logging.getLogger("switchyard.health")


def _check_target(b: BackendConfig, snapshot: Snapshot) -> tuple[Any, ...]:
    """What a check of ``b`` asks, and with which credentials: a change restarts its loop."""
    return (b.url, b.type, tuple(auth_headers(b)), health_path(snapshot.health_checks, b))


def circuit_policy(snapshot: Snapshot) -> Policy:
    """``circuit_breaker`` as the circuits read it (an unset threshold is ``health_checks``', unset
    minimum calls the threshold)."""
    cb = snapshot.circuit_breaker
    threshold = cb.failure_threshold or snapshot.health_checks.unhealthy_threshold
    return Policy(failure_threshold=threshold, window=cb.window, failure_rate=cb.failure_rate,
                  minimum_calls=cb.minimum_calls or threshold, min_callers=cb.min_callers,
                  timeout=cb.timeout, max_timeout=cb.max_timeout,
                  half_open_max_requests=cb.half_open_max_requests,
                  half_open_success_threshold=cb.half_open_success_threshold)


@frozen
class HealthView:
    backends: Mapping[str, BackendHealth]
    checks_enabled: bool = True
    circuits: Mapping[tuple[str, str], Circuit] = {}
    max_probes: int = 1   # circuit_breaker.half_open_max_requests

    def routable(self, name: str) -> bool:
        h = self.backends.get(name)
        return h is None or h.routable

    def circuit(self, name: str, model: str) -> Circuit:
        return self.circuits.get((name, model), CLEAN)

    def admits(self, name: str, model: str, now: float) -> bool:
        return self.routable(name) and (not self.circuits or self.circuit(name, model).admits(now, self.max_probes))

    def count(self, state: HealthState) -> int:
        return sum(1 for h in self.backends.values() if h.state is state)


class BackendHealthActor:
    name = "health"

    def __init__(self, snapshot: Snapshot, upstream: Upstream) -> None:
        self.snapshot = snapshot
        self.upstream = upstream
        cfg = snapshot.health_checks
        self.thresholds = Thresholds(unhealthy=cfg.unhealthy_threshold, healthy=cfg.healthy_threshold)
        self.policy = circuit_policy(snapshot)
        self.view = HealthView({b.name: BackendHealth() for b in snapshot.backends if b.enabled},
                               checks_enabled=cfg.enabled, max_probes=self.policy.half_open_max_requests)
        self._adapter_faults: set[tuple[str, type]] = set()   # (backend, exception type) logged with a traceback
        self._windows: dict[tuple[str, str], Window] = {}     # the closed circuits' windows, never published
        self._hushed: set[tuple[str, str]] = set()   # routes whose last probe failed for a suspect (debug logs)

    # --- passive: called by requests -------------------------------------

    def dispatching(self, name: str, model: str, now: float) -> bool:
        """A call goes to (name, model). True if it is a probe: of an open circuit past its cooldown,
        or one more of a half-open circuit with room for it."""
        c = self.view.circuits.get((name, model))
        if c is not None and c.state is not CircuitState.CLOSED and c.admits(now, self.policy.half_open_max_requests):
            self._set_circuit(name, model, on_probe(c), "probing")
            return True
        return False

    def call_failed(self, name: str, model: str, error: str, caller: str = ANONYMOUS) -> None:
        """A call of ``caller`` failed on (name, model) (``actors/call/verdicts.py``'s ``failing_caller``)."""
        if not self.snapshot.circuit_breaker.enabled:
            return
        key = (name, model)
        c = self.view.circuit(name, model)
        hushed = proves_nothing(c, caller)
        after, window = on_failure(c, self._windows.get(key), trio.current_time(), self.policy, caller)
        self._keep_window(key, window)
        self._set_circuit(name, model, after, f"probe failed for suspect {caller}: {error}" if hushed else error,
                          hushed)

    def probe_abandoned(self, name: str, model: str) -> None:
        """A probe that never finished proves nothing: let the next call probe instead."""
        c = self.view.circuits.get((name, model))
        if c is not None and c.state is CircuitState.HALF_OPEN:
            self._set_circuit(name, model, on_probe_abandoned(c), "probe abandoned")

    def call_succeeded(self, name: str, model: str) -> None:
        key = (name, model)
        c = self.view.circuits.get(key)
        if c is None:  # the common case, a route with no failure in its window, costs one lookup
            return
        after, window = on_success(c, self._windows.get(key), trio.current_time(), self.policy)
        self._keep_window(key, window)
        if after is not c:   # else a success inside a window: counted, nothing to publish
            self._set_circuit(name, model, after, "ok")

    def window(self, name: str, model: str) -> Window | None:
        """The window of (name, model)'s closed circuit, if one is open (for inspection: it is not published)."""
        return self._windows.get((name, model))

    def _keep_window(self, key: tuple[str, str], window: Window | None) -> None:
        if window is None:
            self._windows.pop(key, None)
        else:
            self._windows[key] = window

    def _set_circuit(self, name: str, model: str, after: Circuit, why: str, hushed: bool = False) -> None:
        """Publish ``after`` as (name, model)'s circuit. ``hushed``: a suspect's failed probe, logged at debug
        level, as is the next probe going out."""
        key = (name, model)
        before = self.view.circuit(name, model)
        if after.state is not before.state:
            quiet = hushed or (key in self._hushed and after.state is CircuitState.HALF_OPEN)
            level = logging.DEBUG if quiet else logging.INFO if after.state is not CircuitState.OPEN \
                else logging.WARNING
            log.log(level, "backend %s model %s: circuit %s -> %s (%s)", name, model, before.state.value,
                    after.state.value, why)
            if hushed:
                self._hushed.add(key)
            elif not quiet:
                self._hushed.discard(key)
        circuits = dict(self.view.circuits)
        if after.state is CircuitState.CLOSED and after.failures == 0:   # no window open: nothing to keep
            circuits.pop(key, None)
        else:
            circuits[key] = after
        self.view = attrs.evolve(self.view, circuits=circuits)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._loops: dict[str, trio.CancelScope] = {}
            self._sync_loops(restart=())
            task_status.started(self)
            await trio.sleep_forever()  # check loops come and go with reconfigure()

    def reconfigure(self, snapshot: Snapshot) -> None:
        """A new config revision: new backends are checked at once, removed ones forgotten.

        A backend whose address, type, key, anthropic-version or check path changed starts over
        as unknown; the others keep their state and circuits. Intervals and
        thresholds apply from each loop's next check; ``circuit_breaker``'s numbers from each
        circuit's next event (turned off, it forgets every circuit).
        """
        old = {b.name: b for b in self.snapshot.backends if b.enabled}
        new = {b.name: b for b in snapshot.backends if b.enabled}
        changed = {n for n in old.keys() & new.keys()
                   if _check_target(old[n], self.snapshot) != _check_target(new[n], snapshot)}
        self.snapshot = snapshot
        cfg = snapshot.health_checks
        self.thresholds = Thresholds(unhealthy=cfg.unhealthy_threshold, healthy=cfg.healthy_threshold)
        self.policy = circuit_policy(snapshot)
        backends = {n: (BackendHealth() if n in changed or n not in self.view.backends else self.view.backends[n])
                    for n in new}
        circuits = {k: c for k, c in self.view.circuits.items()
                    if k[0] in new and k[0] not in changed and snapshot.circuit_breaker.enabled}
        self._windows = {k: w for k, w in self._windows.items() if k in circuits}
        self._hushed &= circuits.keys()
        self.view = HealthView(backends, checks_enabled=cfg.enabled, circuits=circuits,
                               max_probes=self.policy.half_open_max_requests)
        self._sync_loops(restart=changed)

    def _sync_loops(self, restart: Any) -> None:
        nursery = getattr(self, "_nursery", None)
        if nursery is None:
            return  # not running yet: run() starts the loops
        # A kind with no route to check unsigned (bedrock) is judged by its calls alone (its circuits).
        wanted = {b.name: b for b in self.snapshot.backends
                  if b.enabled and not kind_of(b).passive_health} if self.view.checks_enabled else {}
        for name in list(self._loops):
            if name not in wanted or name in restart:
                self._loops.pop(name).cancel()
        for name, backend in wanted.items():
            if name not in self._loops:
                scope = self._loops[name] = trio.CancelScope()
                nursery.start_soon(self._check_loop, backend, scope)

    async def _check_loop(self, backend: BackendConfig, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                cfg = self.snapshot.health_checks  # re-read: intervals and timeouts change live
                url = join_url(backend.url, health_path(cfg, backend))
                began = trio.current_time()  # a fixed cadence: a slow check does not push the next one
                outcome, error = await self._check(backend.name, url, auth_headers(backend), cfg.timeout)
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
            except Exception as exc:
                # Raised inside the backend's adapter (its transport, a simulator): its failed check, never
                # the actor's crash; the traceback is logged once per backend and kind of exception.
                if (name, type(exc)) not in self._adapter_faults:
                    self._adapter_faults.add((name, type(exc)))
                    log.error("health check of backend %r failed inside its adapter (%s)", name,
                              type(exc).__name__, exc_info=exc)
                return Outcome.FAIL, f"failed inside its adapter ({type(exc).__name__}: {exc})"
            if response.is_success:
                return Outcome.OK, None
            if response.status_code == 503:
                return Outcome.WARMING, "HTTP 503 (warming up)"
            return Outcome.FAIL, f"HTTP {response.status_code}"
        return Outcome.FAIL, f"no answer within {timeout:g}s"

    def _record(self, name: str, outcome: Outcome, error: str | None) -> None:
        before = self.view.backends.get(name)
        if before is None:
            return
        after = observe(before, outcome, trio.current_time(), self.thresholds, error)
        if after == before:
            return
        if after.state is not before.state:
            level = logging.INFO if after.routable else logging.WARNING
            log.log(level, "backend %s: %s -> %s (%s)", name, before.state.value, after.state.value,
                    error or "ok")
        self.view = attrs.evolve(self.view, backends={**self.view.backends, name: after})
