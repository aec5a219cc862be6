"""A simulated engine's capacity (``simulation.max_concurrency``): requests past it wait, first come first served.

A real engine serves so many requests at once and queues the rest; without
that a simulated backend answers any load as fast as one request, and no
test can show one kind of traffic slowing another. Only for demos and tests.
"""

from __future__ import annotations

from collections import deque

import trio


class Slots:
    def __init__(self) -> None:
        self.busy = 0                     # requests being served
        self.limit = 0                    # the last one asked for (0: none)
        self._waiting: deque[trio.Event] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return len(self._waiting)

    async def take(self, limit: int) -> None:
        """A slot for one request, waiting in line while ``limit`` (0: no limit) are busy."""
        self.limit = limit
        if limit <= 0 or (self.busy < limit and not self._waiting):
            self.busy += 1
            return
        turn = trio.Event()
        self._waiting.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():   # handed a slot as it was cancelled: the next in line has it
                self.give()
            else:
                self._waiting.remove(turn)
            raise

    def give(self) -> None:
        """A request ended: its slot to the first in line, or free."""
        if self._waiting and (self.limit <= 0 or self.busy <= self.limit):
            self._waiting.popleft().set()   # handed over: as many busy as before
        elif self.busy > 0:
            self.busy -= 1
