"""The sink between a call's own run and its client that keeps what the upstream answer was.

It passes everything on unchanged and keeps a copy: the status, and the
bytes sent, up to a bound (past it the copy is dropped: the answer is too
large to store anyway). Whether the copy is a clean answer worth storing is
judged after the run (``stage.py``), from this and the call's route events.
It wraps the sink the RequestActor writes to, so with dedup only the call
that ran upstream (the flight's lead) records: a follower's copy never is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from switchyard.actors.errors import GatewayError
    from switchyard.actors.relay import ResponseSink


class Recorder:
    __slots__ = ("sink", "limit", "status", "chunks", "size", "failed", "overflow")

    def __init__(self, sink: "ResponseSink", limit: int) -> None:
        self.sink = sink
        self.limit = limit              # bytes kept at most
        self.status = 0
        self.chunks: list[bytes] = []
        self.size = 0
        self.failed = False
        self.overflow = False

    @property
    def started(self) -> bool:
        return self.sink.started

    @property
    def finished(self) -> bool:
        return self.sink.finished

    @property
    def streaming(self) -> bool:   # a dedup flight reads its client's
        return bool(getattr(self.sink, "streaming", False))

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status
        await self.sink.start(status, headers)

    async def send(self, chunk: bytes) -> None:
        if not self.overflow:
            self.size += len(chunk)
            if self.size > self.limit:
                self.overflow = True
                self.chunks = []
            else:
                self.chunks.append(chunk)
        await self.sink.send(chunk)

    async def finish(self) -> None:
        await self.sink.finish()

    async def fail(self, error: "GatewayError") -> None:
        self.failed = True
        await self.sink.fail(error)
