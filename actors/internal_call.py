"""A call the gateway makes for itself through its own routing, answered into a sink that keeps the body.

The semantic cache's embeddings call and a moderation guardrail's
moderations call are such calls: a ``RequestActor`` of their own (selection,
health, circuits, retries, pricing and a ledger record as for any call),
whose answer nobody streams to a client: ``Kept`` holds it whole for the
caller to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from switchyard.actors.errors import GatewayError

BODY_LIMIT = 4 * 1024 * 1024   # bytes of an answer kept; a longer one is cut (and reads as malformed)


class Kept:
    """A sink that keeps a buffered answer (an internal call is never streamed)."""

    streaming = False

    def __init__(self) -> None:
        self.status = 0
        self.chunks: list[bytes] = []
        self.size = 0
        self.error: "GatewayError | None" = None
        self.started = False
        self.finished = False

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status, self.started = status, True

    async def send(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size <= BODY_LIMIT:
            self.chunks.append(chunk)

    async def finish(self) -> None:
        self.finished = True

    async def fail(self, error: "GatewayError") -> None:
        self.error, self.finished = error, True

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


async def run_kept(actor: Any, kept: Kept) -> None:
    """Run the admitted ``actor`` into ``kept``. Its client watcher (a task in the Runtime's nursery) waits
    for the run's end, so it ends with the call rather than sleeping on until the server stops."""
    over = trio.Event()
    try:
        await actor.run(kept, over.wait)
    finally:
        over.set()
