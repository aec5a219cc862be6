"""The routing strategies ``switchyard simulate`` compares: each a change to the config, and perhaps some wiring.

A strategy is a named edit of the config mapping (``selection_strategy``,
``prefix_routing``, ``kv_cache_index``, the engines' events) and, for the
event-fed index, a hook run once the gateway is up that hands the simulated
engines' KV events to the gateway's index (``runtime.kv_index``: ``state``
with a source up per backend, then ``apply`` per batch, in order). A strategy
this build cannot run (a config key it does not know, no index to feed) is
skipped with the reason.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import attrs
import trio
from attrs import frozen

from switchyard.actors.kv.events import EventBatch, SourceState
from switchyard.config.fields import yaml_key
from switchyard.config.schema import Snapshot
from switchyard.protocol.simulated.openai import SimulatedTransport

Config = dict[str, Any]


@frozen
class Strategy:
    name: str
    edit: Callable[[Config], None]                 # changes the config mapping in place
    # once the gateway runs: (runtime, engines by backend name, nursery) -> None, or why it cannot run
    wire: Callable[[Any, dict[str, SimulatedTransport], trio.Nursery], str | None] | None = None
    needs: str | None = None                       # a top-level config key this build must know


def _strategy(name: str, **extra: Any) -> Callable[[Config], None]:
    def edit(config: Config) -> None:
        config["selection_strategy"] = name
        for key, value in extra.items():
            config.setdefault(key, {}).update(value)
    return edit


def _kv_index(events: bool) -> Callable[[Config], None]:
    """The KV-cache index over round robin (what it leaves undecided is taken in turns); ``events``: fed by
    the engines' events, else the gateway's own record."""
    def edit(config: Config) -> None:
        _strategy("RoundRobin", prefix_routing={"enabled": True}, kv_cache_index={"enabled": True})(config)
        index = config["kv_cache_index"]
        for backend in config.get("backends") or ():
            kv = ((backend.get("simulation") or {}).get("engine_kv"))
            if isinstance(kv, dict):
                kv["events"] = events
                if events:   # an event-fed backend: no approximate record; its events come in process (no reader)
                    index.setdefault("event_sources", {})[backend["name"]] = {
                        "endpoint": f"tcp://127.0.0.1:5557/{backend['name']}"}
    return edit


def feed_events(runtime: Any, engines: dict[str, SimulatedTransport], nursery: trio.Nursery) -> str | None:
    """Each engine's KV events to the gateway's index, in order, at the instant they are published."""
    index = getattr(runtime, "kv_index", None)
    if index is None or not hasattr(index, "apply") or not hasattr(index, "state"):
        return "this build's runtime has no KV-cache index to feed (runtime.kv_index)"
    send, receive = trio.open_memory_channel[SourceState | tuple[str, EventBatch]](math.inf)
    def listener(name: str) -> Callable[[EventBatch], None]:
        return lambda batch: send.send_nowait((name, batch))

    for name, sim in engines.items():
        send.send_nowait(SourceState(name, up=True))
        sim.kv.listeners.append(listener(name))

    async def apply() -> None:
        async for item in receive:
            done = index.state(item) if isinstance(item, SourceState) else index.apply(*item)
            if inspect.isawaitable(done):
                await done
    nursery.start_soon(apply)
    return None


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("RoundRobin", _strategy("RoundRobin")),
    Strategy("LeastLatency", _strategy("LeastLatency")),
    Strategy("PrefixAwareHash", _strategy("PrefixAwareHash", prefix_routing={"enabled": True})),
    Strategy("kv-approximate", _kv_index(events=False), needs="kv_cache_index"),
    Strategy("kv-events", _kv_index(events=True), wire=feed_events, needs="kv_cache_index"),
)}


def unavailable(strategy: Strategy) -> str | None:
    """Why this build cannot run ``strategy`` (None: it can)."""
    if strategy.needs is not None and strategy.needs not in {yaml_key(f) for f in attrs.fields(Snapshot)}:
        return f"this build has no {strategy.needs} config section"
    return None
