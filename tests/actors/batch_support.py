"""What the gateway-run batch tests share: batches put straight into the store, and the wait for their end.

The runner's wall clock is tied to virtual time (``T0`` + trio's clock), so
the instants it stores are exact under ``autojump_clock``.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import trio

from switchyard.actors.batches.records import TERMINAL, VALIDATING, Batch, Line
from switchyard.protocol.serving.app import App

T0 = 1_750_000_000.0
DAY = 86_400.0
TEAM = [(b"authorization", b"Bearer sk-team-0123456789abcdef")]


def wall() -> float:
    return T0 + trio.current_time()


def virtual(app: App) -> App:
    """``app``'s batch runner on the virtual wall clock."""
    assert app.runtime is not None and app.runtime.batch_runner is not None
    app.runtime.batch_runner.clock = wall
    return app


def chat_line(model: str = "demo", text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


def add_batch(app: App, bodies: list[dict[str, Any]], *, owner: str = "team", window: float = DAY,
              url: str = "/v1/chat/completions") -> str:
    """A validating batch of ``bodies`` (custom ids ``req-1``, ``req-2``, ...), as the doors would store it."""
    assert app.runtime is not None and app.runtime.batch_store is not None
    batch_id, now = "batch_" + secrets.token_hex(12), wall()
    batch = Batch(batch_id, owner, url, "file-" + secrets.token_hex(12), "24h", VALIDATING, now, now + window,
                  total=len(bodies))
    lines = [Line(batch_id, n, f"req-{n}", url, json.dumps(body)) for n, body in enumerate(bodies, start=1)]
    app.runtime.batch_store.add_batch(batch, lines)
    return batch_id


def batch_now(app: App, batch_id: str) -> Batch:
    assert app.runtime is not None and app.runtime.batch_store is not None
    found = app.runtime.batch_store.batch(None, batch_id)
    assert found is not None
    return found


async def ended(app: App, batch_id: str, within: float = 600.0) -> Batch:
    """The batch once terminal (checked every 10 ms of virtual time)."""
    with trio.fail_after(within):
        while (batch := batch_now(app, batch_id)).status not in TERMINAL:
            await trio.sleep(0.01)
    return batch


def file_lines(app: App, file_id: str | None) -> list[dict[str, Any]]:
    assert app.runtime is not None and app.runtime.batch_store is not None and file_id is not None
    content = app.runtime.batch_store.content(file_id)
    assert content is not None and content.endswith(b"\n")
    return [json.loads(line) for line in content.decode().splitlines()]
