"""One alert POSTed to the webhooks that want it, retried with backoff, its status kept in the alerts table.

A round POSTs to every webhook not yet answered with a 2xx; a round with a
failure is tried again after 1, 2, 4, 8 seconds, ``ATTEMPTS`` rounds in all,
and the row says ``pending`` (with the attempts so far and the last error)
until it is ``delivered`` or ``failed``. A worker stopped between two rounds
leaves the row ``pending``; once it has not been written for ``stale_after``
another worker takes it over and goes on from the next round (``actor.py``).
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import AsyncIterator, Awaitable, Callable, Sequence
from urllib.parse import urlsplit

import httpx
import trio

from switchyard.actors.alerts.records import DELIVERED, FAILED, PENDING, Alert
from switchyard.config.alerts import AlertWebhook

ATTEMPTS = 5
FIRST_PAUSE = 1.0    # seconds before the second round; doubled before each next one
TIMEOUT = 5.0        # seconds one POST may take
ERROR_MAX = 300      # characters of the last error kept

Post = Callable[[AlertWebhook, bytes], Awaitable[int]]          # the answer's status
Update = Callable[[str, int, "str | None"], Awaitable[None]]   # status, attempts, last error


def payload(alert: Alert, hook: AlertWebhook) -> bytes:
    """The body ``hook`` receives: the alert's fields as JSON, or a Slack incoming webhook's ``{"text"}``."""
    body = {"text": alert.text()} if hook.format == "slack" else alert.body()
    return json.dumps(body).encode()


@asynccontextmanager
async def poster() -> AsyncIterator[Post]:
    """POSTs through one client, made at the first POST and closed at the block's end: a worker whose
    config names no webhook never makes one (its TLS context parses the CA bundle, about 30 ms of CPU on
    the event loop)."""
    client: httpx.AsyncClient | None = None

    async def post(hook: AlertWebhook, body: bytes) -> int:
        nonlocal client
        if client is None:
            client = httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False)
        headers = [("content-type", "application/json"), *hook.headers]
        with trio.fail_after(TIMEOUT):
            response = await client.post(hook.url, content=body, headers=headers)
        return response.status_code

    try:
        yield post
    finally:
        if client is not None:
            await client.aclose()


def stale_after(hooks: int) -> float:
    """Seconds a pending row may go unwritten while its sender still works on it: ``hooks`` POSTs of a round
    each taking their whole ``TIMEOUT``, then the longest pause, and a minute for clocks that differ."""
    return float(hooks * TIMEOUT + FIRST_PAUSE * 2 ** (ATTEMPTS - 2) + 60.0)


async def deliver(alert: Alert, hooks: Sequence[AlertWebhook], post: Post, update: Update, first: int = 1) -> bool:
    """Every hook answered 2xx within ``ATTEMPTS`` rounds (the row says delivered), else failed. ``first``:
    the round to start from (a taken-over alert goes on where its sender stopped)."""
    waiting = list(hooks)
    start = max(1, min(first, ATTEMPTS))
    pause = FIRST_PAUSE * 2 ** (start - 1)
    for attempt in range(start, ATTEMPTS + 1):
        errors = []
        for hook in list(waiting):
            why = await _one(alert, hook, post)
            if why is None:
                waiting.remove(hook)
            else:
                errors.append(f"{_host(hook.url)}: {why}")
        if not waiting:
            await update(DELIVERED, attempt, None)
            return True
        last = "; ".join(errors)[:ERROR_MAX]
        await update(FAILED if attempt == ATTEMPTS else PENDING, attempt, last)
        if attempt < ATTEMPTS:
            await trio.sleep(pause)
            pause *= 2
    return False


def _host(url: str) -> str:
    """A webhook as an error names it: its scheme and host (the path of a Slack URL is its secret)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"


async def _one(alert: Alert, hook: AlertWebhook, post: Post) -> str | None:
    try:
        status = await post(hook, payload(alert, hook))
    except trio.TooSlowError:
        return f"no answer within {TIMEOUT:g}s"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return None if 200 <= status < 300 else f"answered HTTP {status}"
