"""Failed API-key authentication slowed down per client address, so guessing keys from one place is slow.

Each worker counts the 401s it gives each client address for a key it
presented (a missing key is no guess) (as
``server.trusted_proxies`` lets it be believed) in a window of ``WINDOW``
seconds. The first ``FREE`` of a window are answered at once: a client with
a stale key sees its error without delay. Past them, each further failure
waits ``PAUSE`` seconds, one after the other for that address: guesses sent
in parallel from one address are answered one ``PAUSE`` apart. A request
with a valid key never waits. At most ``TRACKED`` addresses are remembered
(the least recent forgotten first), so a flood of addresses cannot grow the
table.
"""

from __future__ import annotations

from collections import OrderedDict

import trio

WINDOW = 60.0     # seconds over which an address's failures are counted
FREE = 5          # failures a window answers at once
PAUSE = 1.0       # seconds each further failure waits, one after another per address
TRACKED = 10_000  # addresses remembered at most


class _Address:
    __slots__ = ("since", "count", "lock")

    def __init__(self, since: float) -> None:
        self.since = since
        self.count = 0
        self.lock = trio.Lock()


class FailedAuth:
    def __init__(self) -> None:
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self.slowed = 0   # failures that waited, since start

    async def failed(self, address: str) -> None:
        """A 401 about to be answered to ``address``: return when it may go (at once, or after its pause)."""
        now = trio.current_time()
        entry = self._addresses.get(address)
        if entry is None or now - entry.since >= WINDOW:
            entry = self._addresses[address] = _Address(now)
        self._addresses.move_to_end(address)
        while len(self._addresses) > TRACKED:
            self._addresses.popitem(last=False)
        entry.count += 1
        if entry.count <= FREE:
            return
        self.slowed += 1
        async with entry.lock:
            await trio.sleep(PAUSE)
