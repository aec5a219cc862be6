"""How the Redis limiter sends one script call: bounded in time, its failures one exception.

Scripts go by EVALSHA on the limiter's own connections (``redis_wire``); a Redis that lost them (it
restarted) is sent the script again on NOSCRIPT.

The bound is ``state.operation_timeout`` plus a few times this worker's own loop lag (``LoopLag``):
time the worker spends on its own requests is not Redis's. ``answering`` says whether Redis answered
anything within the bound: an admission's wait is extended while it does. Loading the scripts also opens as many
connections as the limiter's lanes use at once, so a burst after a start or an outage does not spend
its bound on connection handshakes.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

import coredis.exceptions
import trio

from switchyard.protocol.stores.redis_batch import LoopLag
from switchyard.protocol.stores.redis_script import SCRIPTS
from switchyard.protocol.stores.redis_wire import RedisWire

# what a lost connection raises: the socket's error, or a TLS stream's
FAILURES = (coredis.exceptions.RedisError, OSError, trio.BrokenResourceError, trio.ClosedResourceError)

LAG_FACTOR = 3           # an operation's bound grows by this many times the worker's own loop lag
PROBE_TIMEOUT = 1.0      # loading may take longer than an operation: it may have to connect first


class RedisUnavailable(Exception):
    """Redis did not answer in time, or answered with an error."""


def where(url: str) -> str:
    """host:port/db of a Redis URL: never its credentials."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def reason(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_script_error(exc: RedisUnavailable) -> bool:
    """Whether Redis ran the script and it failed (a bug, not an outage: retrying will not help). A
    server that is loading, read-only or in a cluster's failover answers with errors of other classes."""
    return type(exc.__cause__) in (coredis.exceptions.ResponseError, coredis.exceptions.WrongTypeError)


class Scripts:
    """The limiter's scripts on its connections. ``run`` holds the connections (closed when it ends)
    and watches the loop's lag; ``op`` and ``load`` may be called while it runs."""

    def __init__(self, wire: RedisWire, timeout: float) -> None:
        self.wire = wire
        self.timeout = timeout
        self.lag = LoopLag()
        self._sha = {name: hashlib.sha1(text.encode()).hexdigest() for name, text in SCRIPTS.items()}
        self.answered = -float("inf")   # trio time of the last answer Redis gave this worker

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.lag.run)
                task_status.started()
                await trio.sleep_forever()
        finally:
            await self.wire.aclose()

    def bound(self) -> float:
        """How long one operation may take now: state.operation_timeout, plus LAG_FACTOR times this
        worker's recent loop lag, so a worker busy with its own requests does not take itself for a
        slow Redis."""
        return self.timeout + LAG_FACTOR * self.lag.seconds

    def bound_text(self) -> str:
        lag = self.lag.seconds
        extra = f" + {LAG_FACTOR} x {lag * 1000:.1f} ms this worker's own loop lag" if lag else ""
        return f"{self.timeout * 1000:g} ms (state.operation_timeout{extra})"

    async def op(self, script: str, keys: list[str], args: list[str], *, bound: float | None = None) -> Any:
        """One script call, bounded (by ``bound``, else ``bound()``): its reply, or RedisUnavailable. A caller
        whose own deadline comes first (an admission sent alone, under its watchdog's scope) already
        bounds it: no scope of its own then, one deadline fewer per call."""
        limit = self.bound() if bound is None else bound
        if trio.current_effective_deadline() <= trio.current_time() + limit:
            return await self._op(script, keys, args)
        with trio.move_on_after(limit):
            return await self._op(script, keys, args)
        raise RedisUnavailable(f"no answer within {self.bound_text() if bound is None else f'{bound:g} s'}")

    async def _op(self, script: str, keys: list[str], args: list[str]) -> Any:
        try:
            try:
                reply = await self.wire.call("EVALSHA", self._sha[script], len(keys), *keys, *args)
            except coredis.exceptions.NoScriptError:
                await self.wire.call("SCRIPT", "LOAD", SCRIPTS[script])
                reply = await self.wire.call("EVALSHA", self._sha[script], len(keys), *keys, *args)
        except FAILURES as exc:
            raise RedisUnavailable(reason(exc)) from exc
        self.answered = trio.current_time()
        return reply

    def answering(self) -> bool:
        """Whether Redis gave this worker an answer within the last operation bound: it is there, and a
        call still waiting is waiting behind others (in Redis or in this worker), not on a dead server."""
        return trio.current_time() - self.answered <= self.bound()

    async def load(self, connections: int) -> None:
        """Load every script (a Redis that restarted has none: the first calls then need no NOSCRIPT
        round trips) and open ``connections`` connections. The probe of a Redis that is away."""
        limit = max(self.timeout, PROBE_TIMEOUT)
        with trio.move_on_after(limit):
            try:
                for text in SCRIPTS.values():
                    await self.wire.call("SCRIPT", "LOAD", text)
                await self.wire.warm(connections)
                return
            except FAILURES as exc:
                raise RedisUnavailable(reason(exc)) from exc
        raise RedisUnavailable(f"no answer within {limit * 1000:g} ms")
