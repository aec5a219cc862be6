"""One run of ``switchyard simulate``: a workload through the gateway in process, on virtual time.

The gateway (its Runtime behind the ASGI App) and its simulated engines run
in one ``trio.run`` under a MockClock that jumps to the next timer whenever
every task waits, so a run of many virtual minutes takes a few real seconds,
and no socket is opened. Each session sends its turns as streamed chat calls
straight into the App, as a client would; the time to first token is from the
call's start to its first content chunk.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import attrs
import trio
from trio.testing import MockClock

from switchyard.config.schema import Snapshot
from switchyard.protocol.serving.app import App
from switchyard.protocol.serving.wiring import new_runtime
from switchyard.protocol.simulated.openai import SimulatedTransport
from switchyard.protocol.simulated.workloads import Message, Session, Workload
from switchyard.protocol.wires.upstream import Upstream

# A strategy's extra wiring once the gateway runs: (runtime, engines by backend name, nursery) -> None, or
# why it cannot run.
Wire = Callable[[Any, dict[str, SimulatedTransport], trio.Nursery], str | None]


@attrs.define
class Measured:
    """What one run saw."""

    ttft: list[float] = attrs.Factory(list)      # seconds, per answered call
    failed: int = 0                              # calls that got no streamed answer
    first_sent: float = math.inf
    last_ended: float = 0.0
    per_backend: dict[str, int] = attrs.Factory(dict)   # calls each engine took in
    queried: int = 0                             # prompt tokens the engines looked up in their caches
    hit: int = 0                                 # of those, found there
    skipped: str | None = None                   # why the strategy could not run


def measure(snapshot: Snapshot, workload: Workload, model: str, wire: Wire | None = None) -> Measured:
    """``workload`` through a fresh gateway on ``snapshot`` (a fresh virtual clock, empty caches)."""
    return trio.run(_run, snapshot, workload, model, wire, clock=MockClock(autojump_threshold=0))


async def _run(snapshot: Snapshot, workload: Workload, model: str, wire: Wire | None) -> Measured:
    upstream = Upstream(snapshot)
    engines = {b.name: sim for b in snapshot.backends if (sim := upstream.simulator(b)) is not None}
    out = Measured()
    async with trio.open_nursery() as nursery:
        runtime = await nursery.start(new_runtime(snapshot, upstream=upstream, watch=False, kv_sources=False).run)
        app = App(lambda: snapshot, runtime=runtime)
        out.skipped = wire(runtime, engines, nursery) if wire is not None else None
        if out.skipped is not None:
            nursery.cancel_scope.cancel()
            return out
        start = trio.current_time()
        async with trio.open_nursery() as sessions:
            for session in workload.sessions:
                sessions.start_soon(_session, app, session, model, start, out)
        nursery.cancel_scope.cancel()
    # the engines the workload is for, and any other backend that took some of it
    out.per_backend = {name: sim.served for name, sim in engines.items()
                       if sim.served or sim.simulation.engine_kv is not None}
    out.queried = sum(sim.kv.queries for sim in engines.values())
    out.hit = sum(sim.kv.hits for sim in engines.values())
    return out


async def _session(app: App, session: Session, model: str, start: float, out: Measured) -> None:
    await trio.sleep_until(start + session.start)
    messages: list[Message] = [{"role": "system", "content": session.system}] if session.system else []
    for turn in session.turns:
        if turn.think:
            await trio.sleep(turn.think)
        messages.extend(turn.add)
        answer = await _call(app, {"model": model, "stream": True, "messages": list(messages)}, out)
        if answer is None:
            return   # the session gives up, as a client would
        messages.append({"role": "assistant", "content": answer})


async def _call(app: App, body: dict[str, Any], out: Measured) -> str | None:
    """One streamed chat call; its answer's text, or None when it failed."""
    raw = json.dumps(body).encode()
    sent = trio.current_time()
    out.first_sent = min(out.first_sent, sent)
    status, first, buffer, text = 0, None, b"", []
    done = trio.Event()
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, first, buffer
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            buffer += message.get("body", b"")
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                piece = _content(event)
                if piece:
                    first = first if first is not None else trio.current_time()
                    text.append(piece)
            if not message.get("more_body", False):
                done.set()

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
             "headers": [(b"content-type", b"application/json")]}
    await app(scope, receive, send)
    done.set()
    out.last_ended = max(out.last_ended, trio.current_time())
    if status != 200 or first is None:
        out.failed += 1
        return None
    out.ttft.append(first - sent)
    return "".join(text)


def _content(event: bytes) -> str:
    """The text an SSE event of a chat stream carries (none for the others)."""
    if not event.startswith(b"data: ") or event == b"data: [DONE]":
        return ""
    try:
        chunk = json.loads(event[len(b"data: "):])
        return "".join(c.get("delta", {}).get("content") or "" for c in chunk.get("choices") or ())
    except (ValueError, AttributeError):
        return ""
