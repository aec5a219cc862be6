"""The calls and sessions in flight, which a drain waits for.

A set that also keeps a ``trio.Event`` set exactly while it is empty, so the
drain sleeps until the last call leaves instead of polling: the event is set
when the last member is discarded and replaced by a fresh, unset one when a
member joins the empty set (an Event cannot be cleared). Members add themselves
when they start and discard themselves however they end.
"""

from __future__ import annotations

from typing import Any, Iterator

import trio


class InFlight:
    """A set of calls and sessions, plus ``wait_empty`` for the drain."""

    def __init__(self) -> None:
        self._members: set[Any] = set()
        self._empty = trio.Event()   # set exactly while there are no members (made outside trio.run is fine)
        self._empty.set()

    def add(self, member: Any) -> None:
        if not self._members:
            self._empty = trio.Event()
        self._members.add(member)

    def discard(self, member: Any) -> None:
        self._members.discard(member)
        if not self._members:
            self._empty.set()

    async def wait_empty(self) -> None:
        """Return once no member is left (at once when there is none)."""
        while self._members:   # a member may join between the wake-up and this task running again
            await self._empty.wait()

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __bool__(self) -> bool:
        return bool(self._members)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._members)
