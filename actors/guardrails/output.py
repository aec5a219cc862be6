"""The output stage: a sink in front of the door's that judges a buffered answer before it goes out.

A buffered chat answer (status 200) is held whole, its text judged by each
output guardrail in order, and sent on as enforced: masked in place, or
replaced by the guardrail's error (400 ``guardrail_blocked`` in the door's
shape, or 503 ``guardrail_unavailable`` from a webhook or a moderation model
that fails closed). Streams are not held back: output rules apply to
buffered answers only, and a streamed answer records a ``skipped`` verdict
per output guardrail, so the ledger says it went out unchecked. Error
answers pass untouched. A cache hit replayed into this sink is judged like a
fresh answer.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Sequence

from switchyard.actors import json_read
from switchyard.actors.errors import GatewayError
from switchyard.actors.guardrails.texts import answer_slots, rewrite
from switchyard.actors.guardrails.verdicts import Verdict
from switchyard.config.endpoints import Endpoint
from switchyard.config.guardrails import Guardrail

if TYPE_CHECKING:
    from switchyard.actors.dedup import StreamingSink
    from switchyard.actors.guardrails.stage import Screen
    from switchyard.actors.messages import Call


class _Wrapping:
    """What a sink wrapper passes on: the inner sink's ``streaming`` and its other attributes."""

    inner: "StreamingSink"

    @property
    def streaming(self) -> bool:
        return self.inner.streaming

    def __getattr__(self, name: str) -> object:
        if name == "inner":   # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


class GuardedSink(_Wrapping):
    """The door's sink behind the output guardrails (``ResponseSink``)."""

    def __init__(self, inner: "StreamingSink", screen: "Screen", guardrails: Sequence[Guardrail]) -> None:
        self.inner = inner
        self.screen = screen
        self.guardrails = tuple(guardrails)
        self._held: tuple[int, list[tuple[bytes, bytes]]] | None = None
        self._body: list[bytes] = []
        self._started = False
        self.blocked = False   # an answer refused by a guardrail: the response cache never keeps nor serves it

    @property
    def started(self) -> bool:
        return self._started or self.inner.started

    @property
    def finished(self) -> bool:
        return self.inner.finished

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self._started = True
        if status == 200:
            self._held = (status, headers)
        else:
            await self.inner.start(status, headers)

    async def send(self, chunk: bytes) -> None:
        if self._held is not None:
            self._body.append(chunk)
        else:
            await self.inner.send(chunk)

    async def finish(self) -> None:
        if self._held is None:
            await self.inner.finish()
            return
        status, headers = self._held
        self._held = None
        body = b"".join(self._body)
        self._body = []
        try:
            body = await self._judged(body)
        except GatewayError as err:
            self.blocked = True
            await self.inner.fail(err)
            return
        headers = [(k, str(len(body)).encode() if k.lower() == b"content-length" else v) for k, v in headers]
        await self.inner.start(status, headers)
        await self.inner.send(body)
        await self.inner.finish()

    async def fail(self, error: GatewayError) -> None:
        if self._held is not None:   # an answer held but never finished: it never went out
            self._held, self._body = None, []
        await self.inner.fail(error)

    async def _judged(self, body: bytes) -> bytes:
        try:
            answer = json_read.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            for g in self.guardrails:   # not a chat completion: nothing the detectors can read
                self.screen.record(Verdict(g.name, "output", g.mode, "unread"))
            return body
        changed = answer
        for g in self.guardrails:
            slots = answer_slots(changed)
            if not slots:
                break
            texts = await self.screen.check(g, "output", slots)
            if texts is not None:
                changed = rewrite(changed, slots, texts)
        return body if changed is answer else json.dumps(changed).encode()


class _StreamNote(_Wrapping):
    """A streamed answer's sink: passed through; once a 200 starts, each output guardrail's ``skipped``."""

    def __init__(self, inner: "StreamingSink", screen: "Screen", guardrails: Sequence[Guardrail]) -> None:
        self.inner, self.screen, self.guardrails = inner, screen, guardrails

    @property
    def started(self) -> bool:
        return self.inner.started

    @property
    def finished(self) -> bool:
        return self.inner.finished

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        if status == 200:
            for g in self.guardrails:
                self.screen.record(Verdict(g.name, "output", g.mode, "skipped"))
        await self.inner.start(status, headers)

    async def send(self, chunk: bytes) -> None:
        await self.inner.send(chunk)

    async def finish(self) -> None:
        await self.inner.finish()

    async def fail(self, error: GatewayError) -> None:
        await self.inner.fail(error)


def guard(sink: "StreamingSink", screen: "Screen", call: "Call") -> "StreamingSink":
    """``sink`` behind the screen's output guardrails (a chat call's; another endpoint's were settled
    as ``unread`` by the input stage)."""
    guardrails = screen.output()
    if not guardrails or call.endpoint != Endpoint.CHAT:
        return sink
    if call.stream:
        return _StreamNote(sink, screen, guardrails)
    return GuardedSink(sink, screen, guardrails)
