"""Tell and ask over Trio memory channels.

Tell is fire-and-forget: a full inbox drops the message and counts the drop,
because a request must never wait on telemetry. Ask carries a one-shot reply
channel and waits under a deadline.

An actor told once per call takes what is queued in one turn (``queued``):
Trio's ``receive`` yields to the scheduler even when a message is waiting,
so an actor taking one message per ``receive`` gets one message per pass of
the scheduler, and a busy worker ends many calls in each pass.
"""

from __future__ import annotations

import logging
from typing import Any, Generic, TypeVar

import trio

M = TypeVar("M")
log = logging.getLogger("switchyard.mailbox")


class Mailbox(Generic[M]):
    def __init__(self, name: str, capacity: int = 1024) -> None:
        self.name = name
        self._send, self.inbox = trio.open_memory_channel[M](capacity)
        self.dropped = 0

    def tell(self, message: M) -> bool:
        try:
            self._send.send_nowait(message)
        except trio.WouldBlock:
            self.dropped += 1
            if self.dropped & (self.dropped - 1) == 0:  # log at 1, 2, 4, 8, ... drops
                log.warning("mailbox %s full: %d message(s) dropped so far", self.name, self.dropped)
            return False
        return True


def queued(channel: trio.MemoryReceiveChannel[M], most: int) -> list[M]:
    """Up to ``most`` messages already in ``channel``, taken without waiting."""
    out: list[M] = []
    while len(out) < most:
        try:
            out.append(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
    return out


class AskTimeout(Exception):
    pass


class Reply(Generic[M]):
    """The one-shot reply half an ask message carries."""

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[M](1)

    def answer(self, value: M) -> None:
        try:
            self._send.send_nowait(value)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # answered already, or the asker gave up

    async def wait(self, timeout: float) -> M:
        with trio.move_on_after(timeout) as scope:
            value = await self._receive.receive()
        if scope.cancelled_caught:
            raise AskTimeout(f"no reply within {timeout:g}s")
        return value


async def ask(mailbox: Mailbox[M], make: Any, timeout: float) -> Any:
    """Send ``make(reply)`` and wait for the answer, at most ``timeout`` seconds."""
    reply: Reply[Any] = Reply()
    if not mailbox.tell(make(reply)):
        raise AskTimeout(f"mailbox {mailbox.name} is full")
    return await reply.wait(timeout)
