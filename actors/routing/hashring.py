"""A consistent-hash ring with virtual nodes, and bounded-load lookup.

The hash is blake2b (stable across processes and restarts, unlike ``hash()``),
so every worker and every replica behind a load balancer agrees on placement.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from typing import Iterator, Mapping, Sequence


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


class HashRing:
    """Immutable after construction; build a new ring when membership changes."""

    __slots__ = ("members", "_points", "_owners")

    def __init__(self, members: Sequence[str], virtual_nodes: int) -> None:
        self.members = tuple(members)
        points = sorted(
            (stable_hash(f"{name}#{i}"), name) for name in self.members for i in range(virtual_nodes)
        )
        self._points = [p for p, _ in points]
        self._owners = [n for _, n in points]

    def walk(self, key: str) -> Iterator[str]:
        """Distinct members in ring order, starting at the key's position."""
        if not self._points:
            return
        start = bisect.bisect_left(self._points, stable_hash(key))
        seen: set[str] = set()
        n = len(self._points)
        for i in range(n):
            owner = self._owners[(start + i) % n]
            if owner not in seen:
                seen.add(owner)
                yield owner
                if len(seen) == len(self.members):
                    return

    def lookup(self, key: str) -> str:
        for owner in self.walk(key):
            return owner
        raise LookupError("empty ring")

    def lookup_bounded(self, key: str, loads: Mapping[str, int], epsilon: float) -> str:
        """Consistent hashing with bounded loads: skip members at capacity.

        Capacity is ceil((1 + epsilon) * (total load + 1) / members), so the
        busiest member never carries more than (1 + epsilon) times the mean
        and a key still lands on its home member whenever that one has room.
        """
        return self.place_bounded(key, loads, epsilon)[1]

    def place_bounded(self, key: str, loads: Mapping[str, int], epsilon: float) -> tuple[str, str]:
        """``lookup_bounded``'s answer with the key's home member: (home, chosen)."""
        total = sum(loads.get(m, 0) for m in self.members) + 1
        capacity = math.ceil((1.0 + epsilon) * total / len(self.members))
        home: str | None = None
        for owner in self.walk(key):
            if home is None:
                home = owner
            if loads.get(owner, 0) + 1 <= capacity:
                return home, owner
        if home is None:
            raise LookupError("empty ring")
        return home, home  # unreachable: capacities sum past the total
