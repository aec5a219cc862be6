"""One batch line as a call: what the runner asks (``LineCall``) and what it gets back (``LineAnswer``).

The runner (``runner.py``) is an actor and speaks no HTTP; the protocol
layer hands it a ``RunLine`` (``protocol/doors/batch_lines.py``) that runs
the line through the gateway's own door for its url, in process, so a line
gets exactly what a client's call gets: validation, the key's allowlists and
limits, routing, retries, fallback, guardrails, the ledger (purpose
``batch``), metrics and spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

import attrs
from attrs import frozen

from switchyard.actors.ids import random_hex

if TYPE_CHECKING:
    from switchyard.actors.errors import GatewayError
    from switchyard.config.access import ApiKey


@frozen
class LineCall:
    """A line to run: its ``url`` and ``body`` as uploaded, under its owner's ``key`` (None: keys are off),
    or ``refused``: why that key may call no more (deleted, revoked, expired), answered as the door's 401."""

    url: str
    body: bytes = attrs.field(repr=False)
    request_id: str
    key: "ApiKey | None" = None
    refused: "GatewayError | None" = attrs.field(default=None, eq=False)


@frozen
class LineAnswer:
    """What the door answered: its status, its JSON body and the call's request id. ``retry_after`` (seconds)
    is set when the gateway itself turned the call away for now (its concurrency cap, the key's rate limit,
    a drain): not the line's answer, so the line is run again later instead."""

    status: int
    body: bytes = attrs.field(repr=False)
    request_id: str
    retry_after: float | None = None


RunLine = Callable[[LineCall], Awaitable[LineAnswer]]


def new_request_id() -> str:
    """A line's request id, shaped as the gateway's own (``x-continuum-request-id``)."""
    return "req_" + random_hex(16)
